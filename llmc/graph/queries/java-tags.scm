; Java: types, methods, constructors, invocations, `new`, imports, typed bindings, bases.

(package_declaration [(identifier) (scoped_identifier)] @package)

(class_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(record_declaration name: (identifier) @name) @definition.class
(annotation_type_declaration name: (identifier) @name) @definition.interface
(method_declaration type: (_) @returns name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.method

(method_invocation object: (_) @receiver name: (identifier) @name) @reference.call
(method_invocation !object name: (identifier) @name) @reference.call
(object_creation_expression type: (_) @name) @reference.new

(superclass (_) @reference.inherit)
(super_interfaces (type_list (_) @reference.inherit))
(extends_interfaces (type_list (_) @reference.inherit))

(import_declaration) @import

(local_variable_declaration
  type: (_) @bind.type
  declarator: (variable_declarator name: (identifier) @bind.name)) @binding
(local_variable_declaration
  declarator: (variable_declarator
    name: (identifier) @bind.name
    value: (object_creation_expression type: (_) @bind.type))) @binding
(field_declaration
  type: (_) @bind.type
  declarator: (variable_declarator name: (identifier) @bind.name)) @binding
(formal_parameter type: (_) @bind.type name: (identifier) @bind.name) @binding
(enhanced_for_statement type: (_) @bind.type name: (identifier) @bind.name) @binding
