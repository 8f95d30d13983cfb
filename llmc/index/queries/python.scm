; Python definitions. Decorators are added by the chunker (decorated_definition wrapper).
(class_definition
  name: (identifier) @name) @definition.class

(function_definition
  name: (identifier) @name) @definition.function
