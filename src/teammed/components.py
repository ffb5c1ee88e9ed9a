"""The component and preset names, as plain data (no pydantic), so that building the command
line's help does not import the configuration model. `teammed.config` builds its
`TeamworkConfig` presets from this table."""

from __future__ import annotations

__all__ = ["COMPONENTS", "PRESET_COMPONENTS"]

COMPONENTS = (
    "shared_mental_model",
    "leadership",
    "team_orientation",
    "trust",
    "mutual_monitoring",
    "closed_loop",
)

# The spec's §5.2: each single-component preset carries the companions it needs.
PRESET_COMPONENTS: dict[str, tuple[str, ...]] = {
    "base": (),
    "smm": ("shared_mental_model",),
    "leadership": ("leadership",),
    "team_orientation": ("team_orientation", "leadership"),
    "trust": ("trust",),
    "mutual_monitoring": ("mutual_monitoring", "leadership", "trust"),
    "closed_loop": ("closed_loop",),
    "c6": ("shared_mental_model", "leadership", "team_orientation"),
    "c7": ("leadership", "trust", "mutual_monitoring"),
    "all": COMPONENTS,
    # 001's Table 1 "All Compon.": its five components; closed loop (000's sixth) is not among them
    "all5": tuple(c for c in COMPONENTS if c != "closed_loop"),
}
