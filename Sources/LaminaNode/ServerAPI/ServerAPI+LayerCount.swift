import Foundation

extension ServerAPI {
    /// Layer's `Layer-Count` header of a list: how many items there are in all (not only on
    /// this page).
    static func layerCount(_ total: Int) -> (String, String) { ("layer-count", String(total)) }
}
