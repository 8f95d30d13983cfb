; Rust: items, impl blocks (a @scope.impl qualifies its methods by the implemented type),
; calls (plain, path and method), struct literals as instantiation, use / mod, bindings.

(function_item name: (identifier) @name return_type: (_)? @returns) @definition.function
(function_signature_item name: (identifier) @name return_type: (_)? @returns) @definition.function
(struct_item name: (type_identifier) @name) @definition.class
(enum_item name: (type_identifier) @name) @definition.enum
(union_item name: (type_identifier) @name) @definition.class
(trait_item name: (type_identifier) @name) @definition.trait
(type_item name: (type_identifier) @name) @definition.type
(mod_item name: (identifier) @name body: (declaration_list)) @definition.module
(macro_definition name: (identifier) @name) @definition.function
(impl_item type: (_) @name) @scope.impl

(call_expression function: (identifier) @name) @reference.call
(call_expression function: (scoped_identifier path: (_) @receiver name: (identifier) @name))
  @reference.call
(call_expression function: (field_expression value: (_) @receiver field: (field_identifier) @name))
  @reference.call
(call_expression
  function: (generic_function function: (scoped_identifier path: (_) @receiver name: (identifier) @name)))
  @reference.call
(struct_expression name: (type_identifier) @name) @reference.new
(struct_expression name: (scoped_type_identifier path: (_) @receiver name: (type_identifier) @name))
  @reference.new

(impl_item trait: (_) @reference.inherit)
(trait_item bounds: (trait_bounds [(type_identifier) (scoped_type_identifier)] @reference.inherit))

(use_declaration) @import
(mod_item !body) @import

(let_declaration pattern: (identifier) @bind.name type: (_) @bind.type) @binding
(let_declaration pattern: (identifier) @bind.name value: (call_expression function: (_) @bind.call))
  @binding
(let_declaration
  pattern: (identifier) @bind.name
  value: (try_expression (call_expression function: (_) @bind.call))) @binding
(let_declaration pattern: (identifier) @bind.name value: (struct_expression name: (_) @bind.type))
  @binding
(parameter pattern: (identifier) @bind.name type: (_) @bind.type) @binding
(field_declaration name: (field_identifier) @bind.name type: (_) @bind.type) @binding
