; Ruby definitions. Modules are containers too (kind "module"), so a method in
; `module Shop; class Cart` is `Shop.Cart.total`.
(module
  name: (_) @name) @definition.module

(class
  name: (_) @name) @definition.class

(method
  name: (_) @name) @definition.method

(singleton_method
  name: (_) @name) @definition.method
