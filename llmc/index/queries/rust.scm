; Rust definitions. An impl block is a class-like container named by its type, so its
; functions become `Type.method`; modules are transparent.
(struct_item
  name: (type_identifier) @name) @definition.class

(enum_item
  name: (type_identifier) @name) @definition.class

(union_item
  name: (type_identifier) @name) @definition.class

(trait_item
  name: (type_identifier) @name) @definition.interface

(impl_item
  type: (_) @name
  body: (_)) @definition.class

(function_item
  name: (identifier) @name) @definition.function

(macro_definition
  name: (identifier) @name) @definition.function
