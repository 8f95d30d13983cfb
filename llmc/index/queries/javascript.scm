; JavaScript / JSX definitions. `export` wrappers are added by the chunker.
(class_declaration
  name: (_) @name) @definition.class

(function_declaration
  name: (identifier) @name) @definition.function

(generator_function_declaration
  name: (identifier) @name) @definition.function

(class_body
  (method_definition
    name: (_) @name) @definition.method)

(class_body
  (field_definition
    property: (property_identifier) @name
    value: [(arrow_function) (function_expression)]) @definition.method)

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function
