"""Languages: the profile language (and, in the channel layer, ETCL)."""

from siftbus.lang.profile import (
    ProfileLimits,
    format_profile,
    load_profiles,
    parse_profile,
    parse_profiles,
)

__all__ = ["ProfileLimits", "format_profile", "load_profiles", "parse_profile", "parse_profiles"]
