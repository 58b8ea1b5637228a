"""Where a lowered module's time goes: `LoweredModule.profile` measures a call per engine layer
and per eager node (measure.py), each row mapped to the FX nodes it covers and their source lines
(sources.py); Profile (profile.py) holds and shows the result."""
