"""The search fixture repository's files, shared by conftest.py and the tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

FILES = {
    "src/shop/cart.py": '''
        """Shopping cart model."""

        from dataclasses import dataclass, field


        @dataclass
        class ShoppingCart:
            """Items a customer is about to buy."""

            items: dict = field(default_factory=dict)

            def add_item(self, sku: str, quantity: int = 1) -> None:
                """Put ``quantity`` of ``sku`` into the cart."""
                self.items[sku] = self.items.get(sku, 0) + quantity

            def remove_item(self, sku: str) -> None:
                self.items.pop(sku, None)

            def total_price(self, prices: dict) -> float:
                """Sum of price times quantity over every item."""
                return sum(prices[sku] * qty for sku, qty in self.items.items())


        def apply_discount(total: float, code: str) -> float:
            """Reduce ``total`` by the percentage encoded in a discount ``code``."""
            if not code.startswith("SAVE"):
                raise ValueError(f"unknown discount code {code}")
            percent = int(code[4:])
            return total * (100 - percent) / 100
        ''',
    "src/shop/payment.py": '''
        """Card payments."""


        class PaymentError(Exception):
            """The payment gateway refused a charge."""


        def charge_card(amount: float, token: str) -> str:
            """Charge ``amount`` to the card behind ``token``; return the receipt id."""
            if amount <= 0:
                raise PaymentError("amount must be positive")
            return f"receipt-{token[-4:]}-{int(amount * 100)}"


        def refund_payment(receipt_id: str) -> bool:
            """Give the money of a receipt back to the customer."""
            return receipt_id.startswith("receipt-")
        ''',
    "web/orders.js": """
        export async function fetchOrders(userId) {
          const response = await fetch(`/api/users/${userId}/orders`);
          if (!response.ok) {
            throw new Error("could not load orders");
          }
          return response.json();
        }

        export function renderInvoice(order) {
          const lines = order.items.map((item) => `${item.name}: ${item.price}`);
          return lines.join("\\n");
        }
        """,
    "server/main.go": """
        package main

        import (
        \t"fmt"
        \t"net/http"
        )

        func StartServer(port int) error {
        \thttp.HandleFunc("/health", handleHealth)
        \treturn http.ListenAndServe(fmt.Sprintf(":%d", port), nil)
        }

        func handleHealth(w http.ResponseWriter, r *http.Request) {
        \tw.WriteHeader(http.StatusOK)
        \tfmt.Fprintln(w, "ok")
        }
        """,
    "docs/install.md": """
        # Installation

        The shop toolkit runs on Python 3.10 or newer.

        ## Installing with pip

        Install the package from PyPI into a virtual environment:

            python -m venv .venv
            pip install shop-toolkit

        ## Configuration

        Set the `SHOP_DATABASE_URL` environment variable to point the toolkit at your
        database. The default is a SQLite file in the current directory.
        """,
    "docs/discounts.md": """
        # Discounts guide

        Customers can enter a discount code at checkout. Codes look like SAVE10 or SAVE25:
        the number is the percentage taken off the order total.

        ## Best practices

        Keep codes short, expire them after a campaign, and never stack two codes on one
        order.
        """,
    "README.md": """
        # shop toolkit

        A tiny example shop: a cart, card payments, an orders web client and a health
        server. See docs/install.md to get started.
        """,
    "tests/test_cart.py": """
        from shop.cart import ShoppingCart, apply_discount


        def test_apply_discount_takes_the_percentage_off():
            assert apply_discount(200.0, "SAVE10") == 180.0


        def test_total_price_sums_items():
            cart = ShoppingCart()
            cart.add_item("apple", 2)
            assert cart.total_price({"apple": 1.5}) == 3.0
        """,
    "legacy/tax_rules.py": '''
        def compute_legacy_vat(amount: float) -> float:
            """Value added tax under the retired 1999 rules."""
            return amount * 0.175
        ''',
}


def write_repo(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def line_of(rel: str, needle: str) -> int:
    """The 1-based line of the first line of fixture file ``rel`` containing ``needle``."""
    lines = textwrap.dedent(FILES[rel]).lstrip("\n").split("\n")
    return next(i for i, line in enumerate(lines, start=1) if needle in line)
