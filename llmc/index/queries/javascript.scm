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

; `res.send = function send(...)`, `exports.parse = (...) => ...`, `Foo.prototype.bar =
; function ...`: a function assigned to a member, named by it (the object is the scope).
(expression_statement
  (assignment_expression
    left: (member_expression
      object: (_) @scope
      property: (property_identifier) @name)
    right: [(arrow_function) (function_expression) (generator_function)])) @definition.function

; Methods of an object literal (`module.exports = { get header() {...}, is(types) {...} }`)
; and functions given as its values (`{ parse: function (str) {...} }`).
(object
  (method_definition
    name: (property_identifier) @name) @definition.method)

(object
  (pair
    key: (property_identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)]) @definition.method)
