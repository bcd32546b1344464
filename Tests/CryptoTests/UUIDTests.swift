import Foundation
import HabitFlowCrypto
import Testing

@Suite("UUIDs without Foundation's per-call costs")
struct UUIDTests {
    @Test("random UUIDs are version 4, RFC variant, and distinct")
    func randomUUIDs() {
        let made = (0..<1_000).map { _ in UUID.random() }
        #expect(Set(made).count == made.count)
        for uuid in made {
            #expect(uuid.uuid.6 >> 4 == 4)
            #expect(uuid.uuid.8 >> 6 == 0b10)
        }
    }

    @Test("the lowercase text is Foundation's canonical form, lowercased")
    func lowercaseText() {
        for uuid in [UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), UUID.random(), UUID.random()] {
            #expect(uuid.lowercasedString == uuid.uuidString.lowercased())
        }
        #expect(
            UUID(uuid: (0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0xAA, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00))
                .lowercasedString == "ffeeddcc-bbaa-9988-7766-554433221100")
    }

    @Test("parses the canonical form in either case and round-trips")
    func parsing() {
        let uuid = UUID.random()
        #expect(UUID(canonical: uuid.lowercasedString) == uuid)
        #expect(UUID(canonical: uuid.uuidString) == uuid)
        #expect(UUID(canonicalText: Array(uuid.lowercasedString.utf8)) == uuid)
    }

    @Test(
        "rejects what is not the canonical form",
        arguments: [
            "", "not a uuid", "ffeeddcc-bbaa-9988-7766-55443322110",  // one digit short
            "ffeeddcc-bbaa-9988-7766-5544332211000",  // one digit long
            "ffeeddccbbaa-9988-7766-554433221100-",  // hyphen moved
            "ffeeddcc-bbaa-9988-7766-55443322110g",  // not hex
            "{feeddcc-bbaa-9988-7766-554433221100}",
        ])
    func rejects(text: String) {
        #expect(UUID(canonical: text) == nil)
        #expect(UUID(uuidString: text) == nil, "Foundation agrees")
    }
}

@Suite("hex text")
struct HexTests {
    @Test("encodes lowercase, decodes either case, round-trips every byte value")
    func roundTrip() {
        let all = (0...255).map(UInt8.init)
        let text = Hex.encode(all)
        #expect(text.hasPrefix("000102") && text.hasSuffix("fdfeff") && text.count == 512)
        #expect(Hex.decode(text.utf8) == all)
        #expect(Hex.decode("DEADbeef".utf8) == [0xDE, 0xAD, 0xBE, 0xEF])
        #expect(Hex.encode([UInt8]()) == "" && Hex.decode("".utf8) == [])
    }

    @Test("rejects an odd number of digits and what is not a digit", arguments: ["abc", "0g", "  ", "0x00", "é0"])
    func rejects(text: String) {
        #expect(Hex.decode(text.utf8) == nil)
    }
}
