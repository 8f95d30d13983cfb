; PHP definitions.
(class_declaration
  name: (name) @name) @definition.class

(interface_declaration
  name: (name) @name) @definition.interface

(trait_declaration
  name: (name) @name) @definition.class

(enum_declaration
  name: (name) @name) @definition.enum

(method_declaration
  name: (name) @name) @definition.method

(function_definition
  name: (name) @name) @definition.function
