import Foundation
import LaminaModel
import LaminaNode
import LaminaNodeFuzzChecks
import LaminaWire
import Testing

/// Replays the seeds (`Fuzz/seeds/`) and every saved failing input (`Fuzz/FailCases/`) of the
/// node's parser fuzz targets through their properties (`NodeFuzzChecks`), and checks that
/// the token seeds reach past the signature (they are signed by the fuzz provider's key).
@Suite struct NodeFuzzReplayTests {
    static let fuzz = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func inputs(_ target: String) throws -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        let seeds = fuzz.appendingPathComponent("seeds/\(target)")
        for name in try FileManager.default.contentsOfDirectory(atPath: seeds.path).sorted() {
            out.append(("seeds/\(target)/\(name)", try [UInt8](Data(contentsOf: seeds.appendingPathComponent(name)))))
        }
        let failCases = fuzz.appendingPathComponent("FailCases")
        for name in try FileManager.default.contentsOfDirectory(atPath: failCases.path).sorted() where name.hasPrefix("\(target)-") {
            out.append(("FailCases/\(name)", try [UInt8](Data(contentsOf: failCases.appendingPathComponent(name)))))
        }
        return out
    }

    @Test func contentHeaderInputsHoldTheirProperties() throws {
        let inputs = try Self.inputs("FuzzContentHeaders")
        #expect(inputs.count >= 6)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkContentHeaders(input) } catch { Issue.record("\(label): \(error)") }
        }
    }

    @Test func identityTokenInputsHoldTheirPropertiesAndReachTheClaims() throws {
        let inputs = try Self.inputs("FuzzIdentityToken")
        #expect(inputs.count >= 8)
        for (label, input) in inputs {
            do { try NodeFuzzChecks.checkIdentityToken(input) } catch { Issue.record("\(label): \(error)") }
        }
        let verifier = IdentityTokenVerifier(
            providers: [IdentityProvider(id: "fuzz", publicKeyPEM: NodeFuzzChecks.fuzzProviderPublicKeyPEM, algorithms: ["ES256"])],
            maxClockSkew: .seconds(60))
        let now = Timestamp(millisecondsSince1970: 1_800_000_000_000)
        func seed(_ name: String) throws -> String {
            String(decoding: try Data(contentsOf: Self.fuzz.appendingPathComponent("seeds/FuzzIdentityToken/\(name)")), as: UTF8.self)
        }
        let claims = try verifier.verify(try seed("valid-es256"), now: now)
        #expect(claims.identity.userID == "alice")
        let expired = try seed("expired")
        do {
            _ = try verifier.verify(expired, now: now)
            Issue.record("an expired token verified")
        } catch {
            #expect(error.code == .tokenExpired)
        }
    }
}
