; TypeScript and TSX: javascript-tags.scm plus types, interfaces and typed bindings.

(function_declaration name: (identifier) @name return_type: (type_annotation (_) @returns)?)
  @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(type_alias_declaration name: (type_identifier) @name) @definition.type
(method_definition name: (property_identifier) @name return_type: (type_annotation (_) @returns)?)
  @definition.method
(abstract_method_signature name: (property_identifier) @name) @definition.method
(method_signature name: (property_identifier) @name) @definition.method
(variable_declarator
  name: (identifier) @name
  value: (arrow_function return_type: (type_annotation (_) @returns))) @definition.function
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(internal_module name: (_) @name) @definition.module

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (member_expression object: (_) @receiver property: (property_identifier) @name))
  @reference.call
(new_expression constructor: (identifier) @name) @reference.new
(new_expression
  constructor: (member_expression object: (_) @receiver property: (property_identifier) @name))
  @reference.new

(extends_clause value: [(identifier) (member_expression)] @reference.inherit)
(implements_clause [(type_identifier) (nested_type_identifier) (generic_type)] @reference.inherit)
(extends_type_clause type: [(type_identifier) (nested_type_identifier) (generic_type)] @reference.inherit)

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
  type: (type_annotation (_) @bind.type)) @binding
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
(required_parameter
  pattern: (identifier) @bind.name
  type: (type_annotation (_) @bind.type)) @binding
(optional_parameter
  pattern: (identifier) @bind.name
  type: (type_annotation (_) @bind.type)) @binding
(required_parameter
  (accessibility_modifier) @bind.attr
  pattern: (identifier) @bind.name
  type: (type_annotation (_) @bind.type)) @binding
(public_field_definition
  name: (property_identifier) @bind.name
  type: (type_annotation (_) @bind.type)) @binding
(public_field_definition
  name: (property_identifier) @bind.name
  value: (new_expression constructor: (_) @bind.call)) @binding

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
