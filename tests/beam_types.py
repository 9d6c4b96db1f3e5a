"""Element types with Beam schemas, in a module without postponed annotations (Beam reads
real annotations only)."""

import typing


class Order(typing.NamedTuple):
    id: int
    customer: typing.Optional[str]
    amount: float
