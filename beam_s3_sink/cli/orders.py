"""Web-shop orders, made up but deterministic, generated inside the pipeline (`--source generate:N`).

Rows are made from a shard number, so that the data set is the same on every run and every
worker, and a reader can recompute what it must find: :func:`expected_totals`.
"""

from __future__ import annotations

import datetime
import random
from typing import Any, Dict, Iterator

import pyarrow as pa

__all__ = ["ORDERS_SCHEMA", "SHARD_ROWS", "orders_shard", "expected_totals"]

SHARD_ROWS = 10_000

ORDERS_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer_id", pa.int32(), nullable=False),
        ("customer_name", pa.string()),
        ("country", pa.string()),
        ("product", pa.string()),
        ("quantity", pa.int16()),
        ("unit_price", pa.float64()),
        ("amount", pa.float64()),
        ("paid", pa.bool_()),
        ("ordered_at", pa.timestamp("us", tz="UTC")),
        ("ship_date", pa.date32()),
        ("note", pa.string()),
        ("receipt", pa.binary()),
    ]
)

_FIRST = ["Ana", "Bo", "Chen", "Dara", "Émile", "Farah", "Giulia", "Hiro", "Ines", "Jonas", "Kofi", "Lena"]
_LAST = ["Silva", "Nguyen", "Müller", "O'Brien", "Kowalski", "Okafor", "García", "Jensen", "Sato"]
_COUNTRIES = ["DE", "FR", "US", "JP", "BR", "NG", "PL", "IE", "DK", "VN"]
_PRODUCTS = [
    ("Espresso beans, 1 kg", 18.5),
    ("Pour-over kettle", 42.0),
    ('Grinder "Burr Pro"', 129.0),
    ("Filter papers (100)", 4.25),
    ("Travel mug", 15.0),
    ("Gift card", 25.0),
]
_NOTES = [
    None,
    None,
    None,
    "leave at the door",
    "gift, no invoice",
    "call before delivery\nthanks!",
    "fragile; handle with care",
    "",
]
_START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def orders_shard(shard: int, rows: int) -> Iterator[Dict[str, Any]]:
    """The orders of one shard: ``order_id`` from ``shard * SHARD_ROWS``, at most ``rows`` in all."""
    rng = random.Random(shard)
    first = shard * SHARD_ROWS
    for order_id in range(first, min(first + SHARD_ROWS, rows)):
        customer = rng.randrange(50_000)
        product, price = _PRODUCTS[rng.randrange(len(_PRODUCTS))]
        quantity = rng.choice((1, 1, 1, 2, 2, 3, 5, 12))
        ordered_at = _START + datetime.timedelta(seconds=rng.randrange(300 * 86400), microseconds=rng.randrange(10**6))
        paid = rng.random() < 0.93
        yield {
            "order_id": order_id,
            "customer_id": customer,
            "customer_name": f"{_FIRST[customer % len(_FIRST)]} {_LAST[customer % len(_LAST)]}",
            "country": _COUNTRIES[customer % len(_COUNTRIES)],
            "product": product,
            "quantity": quantity,
            "unit_price": price,
            "amount": round(price * quantity, 2),
            "paid": paid,
            "ordered_at": ordered_at,
            "ship_date": (ordered_at + datetime.timedelta(days=rng.randrange(1, 6))).date() if paid else None,
            "note": _NOTES[rng.randrange(len(_NOTES))],
            "receipt": rng.randbytes(8) if paid else None,
        }


def expected_totals(rows: int) -> Dict[str, Any]:
    """What a reader of the whole data set must find: row count, order ids, total quantity."""
    quantity = 0
    for shard in range(0, (rows + SHARD_ROWS - 1) // SHARD_ROWS):
        quantity += sum(r["quantity"] for r in orders_shard(shard, rows))
    return {"rows": rows, "order_id_sum": rows * (rows - 1) // 2, "quantity": quantity}
