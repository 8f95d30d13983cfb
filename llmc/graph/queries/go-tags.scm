; Go: functions, methods (qualified by receiver type), types, calls, imports, bindings,
; struct embedding as inheritance. @receiver.type qualifies a method's name.

(package_clause (package_identifier) @package)

(function_declaration name: (identifier) @name result: (_)? @returns) @definition.function
(method_declaration
  receiver: (parameter_list (parameter_declaration type: (_) @receiver.type))
  name: (field_identifier) @name
  result: (_)? @returns) @definition.method
(type_spec name: (type_identifier) @name type: (struct_type)) @definition.class
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec name: (type_identifier) @name type: [(function_type) (type_identifier) (map_type) (slice_type) (qualified_type) (pointer_type) (channel_type) (array_type)]) @definition.type
(method_elem name: (field_identifier) @name) @definition.method

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (selector_expression operand: (_) @receiver field: (field_identifier) @name))
  @reference.call

(field_declaration_list
  (field_declaration !name type: [(type_identifier) (qualified_type) (pointer_type)] @reference.inherit))
(interface_type (type_elem [(type_identifier) (qualified_type)] @reference.inherit))

(import_spec) @import

(short_var_declaration
  left: (expression_list . (identifier) @bind.name)
  right: (expression_list . (call_expression function: (_) @bind.call))) @binding
(short_var_declaration
  left: (expression_list . (identifier) @bind.name)
  right: (expression_list . (composite_literal type: (_) @bind.type))) @binding
(short_var_declaration
  left: (expression_list . (identifier) @bind.name)
  right: (expression_list . (unary_expression operand: (composite_literal type: (_) @bind.type))))
  @binding
(var_spec name: (identifier) @bind.name type: (_) @bind.type) @binding
(var_spec
  name: (identifier) @bind.name
  value: (expression_list . (call_expression function: (_) @bind.call))) @binding
(parameter_declaration name: (identifier) @bind.name type: (_) @bind.type) @binding
(field_declaration name: (field_identifier) @bind.name type: (_) @bind.type) @binding
