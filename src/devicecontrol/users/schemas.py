"""The users/me body, basic and advanced."""

from __future__ import annotations

import msgspec

from devicecontrol.http.hal import Link


class CountryRecord(msgspec.Struct, frozen=True):
    id: int
    geoname_id: int
    continent_code: str
    continent_name: str
    country_code: str
    country_name: str
    city_name: str
    time_zone: str


class UserRelations(msgspec.Struct, frozen=True):
    country: CountryRecord | None


class UserProfile(msgspec.Struct, frozen=True):
    user_id: int
    username: str
    firstname: str
    lastname: str
    phone: str | None
    country_id: int | None
    created: str
    relation: UserRelations | msgspec.UnsetType = msgspec.field(
        name="_relation", default=msgspec.UNSET
    )


class UserLinks(msgspec.Struct, frozen=True):
    self: Link
    controller: Link


class UserResponse(msgspec.Struct, frozen=True):
    users: UserProfile
    links: UserLinks = msgspec.field(name="_links")
