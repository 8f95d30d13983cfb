; TSX (TypeScript + JSX) definitions. `export` wrappers and decorators are added by the chunker;
; namespaces are transparent (not part of qualnames).
(class_declaration
  name: (_) @name) @definition.class

(abstract_class_declaration
  name: (_) @name) @definition.class

(interface_declaration
  name: (_) @name) @definition.interface

(enum_declaration
  name: (_) @name) @definition.enum

(function_declaration
  name: (identifier) @name) @definition.function

(generator_function_declaration
  name: (identifier) @name) @definition.function

(class_body
  (method_definition
    name: (_) @name) @definition.method)

(class_body
  (public_field_definition
    name: (property_identifier) @name
    value: [(arrow_function) (function_expression)]) @definition.method)

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function
