; JavaScript: definitions, calls, `new`, imports / re-exports / require, bindings, bases.
; Capture conventions: see python-tags.scm.

(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (identifier) @name) @definition.class
(method_definition name: (property_identifier) @name) @definition.method
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (member_expression object: (_) @receiver property: (property_identifier) @name))
  @reference.call
(new_expression constructor: (identifier) @name) @reference.new
(new_expression
  constructor: (member_expression object: (_) @receiver property: (property_identifier) @name))
  @reference.new

(class_heritage [(identifier) (member_expression)] @reference.inherit)

(import_statement) @import
(export_statement source: (_)) @import
(variable_declarator
  value: (call_expression
    function: (identifier) @_require
    arguments: (arguments . (string)))
  (#eq? @_require "require")) @import
(export_statement) @export
(assignment_expression
  left: (member_expression object: (identifier) @_module property: (property_identifier) @_exports)
  (#eq? @_module "module")
  (#eq? @_exports "exports")) @export

(variable_declarator
  name: (identifier) @bind.name
  value: (new_expression constructor: (_) @bind.call)) @binding
(variable_declarator
  name: (identifier) @bind.name
  value: (call_expression function: (_) @bind.call)
  (#not-eq? @bind.call "require")) @binding
(variable_declarator
  name: (identifier) @bind.name
  value: (await_expression (call_expression function: (_) @bind.call))) @binding
(assignment_expression
  left: (member_expression object: (this) @bind.self property: (property_identifier) @bind.name)
  right: (new_expression constructor: (_) @bind.call)) @binding
(assignment_expression
  left: (member_expression object: (this) @bind.self property: (property_identifier) @bind.name)
  right: (call_expression function: (_) @bind.call)) @binding

; Literal values: their methods (Array.push, String.trim) are never repository code.
(variable_declarator
  name: (identifier) @bind.name
  value: [(array) (object) (string) (template_string) (number) (regex)] @bind.literal) @binding

; Aliases: `const send = this.client.send`, `this.db = db`.
(variable_declarator
  name: (identifier) @bind.name
  value: [(identifier) (member_expression)] @bind.value) @binding
(assignment_expression
  left: (member_expression object: (this) @bind.self property: (property_identifier) @bind.name)
  right: [(identifier) (member_expression)] @bind.value) @binding
