"""Element types with Beam schemas for the Parquet tests, in a module without postponed
annotations (Beam reads real annotations only)."""

import datetime
import decimal
import typing
import uuid

import numpy as np
from apache_beam.utils.timestamp import Timestamp


class Point(typing.NamedTuple):
    x: int
    label: typing.Optional[str]


class Event(typing.NamedTuple):
    """Every kind of column Beam's own Arrow helpers leave out, next to ones they map."""

    id: int
    small: np.int16
    ratio: np.float32
    count: np.uint32
    name: typing.Optional[str]
    day: datetime.date
    at: datetime.time
    when: datetime.datetime
    instant: Timestamp
    key: uuid.UUID
    points: typing.List[Point]
    tags: typing.Dict[str, int]
    payload: typing.Optional[bytes]


class Priced(typing.NamedTuple):
    id: int
    price: decimal.Decimal
