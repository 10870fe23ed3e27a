/// LaminaWire: the sync-frame codec (frames <-> bytes), as specified in Protocol/SPEC.md.
public enum LaminaWire {}
