"""Languages: the profile language (`lang.profile`) and ETCL (`lang.etcl`); parse and print only."""

from siftbus.lang.profile import (
    ProfileLimits,
    format_profile,
    load_profiles,
    parse_profile,
    parse_profiles,
)

__all__ = ["ProfileLimits", "format_profile", "load_profiles", "parse_profile", "parse_profiles"]
