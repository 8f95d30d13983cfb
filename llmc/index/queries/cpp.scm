; C++ definitions. A function named `A::B::f` outside its class is qualified by the
; chunker as `A.B.f`; template wrappers are added by the chunker; namespaces are
; transparent.
(function_definition
  declarator: (function_declarator
    declarator: (_) @name)) @definition.function

(function_definition
  declarator: (pointer_declarator
    declarator: (function_declarator
      declarator: (_) @name))) @definition.function

(function_definition
  declarator: (reference_declarator
    (function_declarator
      declarator: (_) @name))) @definition.function

(function_definition
  declarator: (pointer_declarator
    declarator: (pointer_declarator
      declarator: (function_declarator
        declarator: (_) @name)))) @definition.function

(class_specifier
  name: (_) @name
  body: (_)) @definition.class

(struct_specifier
  name: (_) @name
  body: (_)) @definition.class

(union_specifier
  name: (_) @name
  body: (_)) @definition.class

(enum_specifier
  name: (_) @name
  body: (_)) @definition.enum
