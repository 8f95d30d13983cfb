; Python: definitions, calls, imports, bindings (for type inference) and bases.
; Captures: @definition.<kind> + @name (+ @returns); @reference.call / @reference.new + @name
; (+ @receiver); @reference.inherit; @import; @binding + @bind.name (+ @bind.self) +
; @bind.type or @bind.call.

(class_definition name: (identifier) @name) @definition.class

(function_definition name: (identifier) @name return_type: (_)? @returns) @definition.function

(call function: (identifier) @name) @reference.call

(call function: (attribute object: (_) @receiver attribute: (identifier) @name)) @reference.call

(class_definition superclasses: (argument_list [(identifier) (attribute)] @reference.inherit))

(import_statement) @import
(import_from_statement) @import

(assignment left: (identifier) @bind.name type: (_) @bind.type) @binding

(assignment left: (identifier) @bind.name right: (call function: (_) @bind.call)) @binding

(assignment
  left: (attribute object: (identifier) @bind.self attribute: (identifier) @bind.name)
  type: (_) @bind.type) @binding

(assignment
  left: (attribute object: (identifier) @bind.self attribute: (identifier) @bind.name)
  right: (call function: (_) @bind.call)) @binding

(typed_parameter (identifier) @bind.name type: (_) @bind.type) @binding

(typed_default_parameter name: (identifier) @bind.name type: (_) @bind.type) @binding

(with_item value: (as_pattern (call function: (_) @bind.call) alias: (as_pattern_target (identifier) @bind.name))) @binding

; Literal values: their methods (list.append, str.join, dict.get) are never repository code.
(assignment
  left: (identifier) @bind.name
  right: [(list) (dictionary) (set) (tuple) (string) (concatenated_string) (integer) (float)
          (list_comprehension) (dictionary_comprehension) (set_comprehension)
          (generator_expression) (true) (false)] @bind.literal) @binding
(assignment
  left: (attribute object: (identifier) @bind.self attribute: (identifier) @bind.name)
  right: [(list) (dictionary) (set) (tuple) (string) (concatenated_string) (integer) (float)
          (list_comprehension) (dictionary_comprehension) (set_comprehension)] @bind.literal)
  @binding

; Aliases: `append = lines.append`, `self.console = console`, `self.x = x or default()`.
(assignment left: (identifier) @bind.name right: [(identifier) (attribute)] @bind.value) @binding
(assignment
  left: (attribute object: (identifier) @bind.self attribute: (identifier) @bind.name)
  right: [(identifier) (attribute)] @bind.value) @binding
(assignment
  left: (attribute object: (identifier) @bind.self attribute: (identifier) @bind.name)
  right: (boolean_operator left: [(identifier) (attribute)] @bind.value)) @binding
