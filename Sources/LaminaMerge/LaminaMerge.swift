/// LaminaMerge: pure merge and ordering rules shared by the node, its peers and the SDK.
public enum LaminaMerge {}
