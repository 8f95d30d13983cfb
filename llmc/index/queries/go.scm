; Go definitions. Methods are qualified by their receiver type (@scope, `*T` and `T[K]`
; are cleaned to `T`); a single-spec `type` declaration wraps its spec.
(function_declaration
  name: (identifier) @name) @definition.function

(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: (_) @scope))
  name: (field_identifier) @name) @definition.method

(type_spec
  name: (type_identifier) @name
  type: [(struct_type) (interface_type)]) @definition.class
