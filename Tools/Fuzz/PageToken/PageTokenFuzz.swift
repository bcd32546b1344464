internal import Foundation
internal import HabitFlowBase64
internal import HabitFlowFuzzSupport
internal import HabitFlowServiceAPI

// Page tokens and change-feed cursors, in three modes picked by the first byte:
//
// 0. A token as a client sends it back (the rest of the input), read for every list the services page through.
//    A token that decodes is the one `PageToken.encode` makes for its fields: one encoding per token.
// 1. A token a client made itself: the checksum is no secret, so anyone can wrap any fields in a valid token. The
//    input gives the list name and the fields as text, `list|field|field...` (text, so that the fuzzer's mutations
//    of numbers keep the rest in place); the token must decode to them, and as a `ListChanges` cursor it is either
//    refused or usable: its bound for every kind of row, its order and its own token.
// 2. The base64 codecs under the tokens: base64url is strict (one text per byte string), base64 lenient.

private let lists = [
    "changes", "habits", "habits+deleted", "entries", "sessions", "friends", "blocks", "leaderboard", "reviews",
]

/// The kinds of a change feed, like the services' (`start` sorts first).
private enum Kind: Int, ChangeKind, CaseIterable {
    case start = 0
    case category = 1
    case habit = 2
    case entry = 3
}

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.writeSeedsIfAsked(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    switch input.byte() % 3 {
    case 0:
        readBack(String(decoding: input.rest(), as: UTF8.self))
    case 1:
        let text = String(decoding: input.rest(), as: UTF8.self)
        let parts = text.split(separator: "|", omittingEmptySubsequences: false)
        crafted(list: String(parts[0]), fields: parts.dropFirst().map(String.init))
    default:
        checkBase64(input.rest())
    }
    return 0
}

private func readBack(_ token: String) {
    for list in lists {
        if let fields = PageToken.decode(token, list: list) {
            expect(PageToken.encode(list: list, fields) == token, "a second encoding of the same token")
        }
        var validator = RequestValidator()
        _ = validator.pageToken(token, list: list, fieldCount: 1)
        _ = validator.pageToken(token, list: list, fieldCount: 2)
    }
    useCursor(token)
}

private func crafted(list: String, fields: [String]) {
    let token = PageToken.encode(list: list, fields)
    if token.utf8.count <= PageToken.maximumLength {
        expect(PageToken.decode(token, list: list) == fields, "a token does not decode to its fields")
    } else {
        expect(PageToken.decode(token, list: list) == nil, "a token over the length limit decoded")
    }
    useCursor(token)
}

/// What a service does with a `ListChanges` cursor: validate it, then page from it.
private func useCursor(_ token: String) {
    var validator = RequestValidator()
    let cursor: ChangeCursor<Kind> = validator.changeCursor(token)
    guard validator.violations.isEmpty else { return }
    for kind in Kind.allCases {
        let bound = cursor.bound(for: kind)
        expect(bound.sequence <= cursor.sequence, "a bound after the cursor")
    }
    _ = cursor < .beginning
    var again = RequestValidator()
    let reread: ChangeCursor<Kind> = again.changeCursor(cursor.token)
    expect(again.violations.isEmpty && reread == cursor, "a cursor's own token reads back differently")
}

private func checkBase64(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let decoded = Base64URL.decode(text) {
        expect(Base64URL.encode(decoded) == text, "base64url decoded a text that is not the encoding")
        expect(Base64.decode(text) == decoded, "lenient base64 reads base64url differently")
    }
    if let decoded = Base64.decode(text) {
        expect(Base64.decode(Base64.encode(decoded)) == decoded, "base64 round trip differs")
    }
    expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes, "base64url round trip differs")
    expect(Base64.decode(Base64.encode(bytes, padding: false)) == bytes, "unpadded base64 round trip differs")
}

// MARK: - Seeds

private func seeds() -> [String: [UInt8]] {
    func sent(_ token: String) -> [UInt8] { [0] + Array(token.utf8) }
    func made(_ list: String, _ fields: [String]) -> [UInt8] {
        [1] + Array(([list] + fields).joined(separator: "|").utf8)
    }
    let id = "3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c"
    return [
        "sent-habits": sent(PageToken.encode(list: "habits", ["1042"])),
        "sent-entries": sent(PageToken.encode(list: "entries", ["20480", "77"])),
        "sent-changes": sent(
            ChangeCursor<Kind>(sequence: 1234, kind: .habit, id: UUID(canonical: id) ?? UUID.min).token),
        "sent-wrong-list": sent(PageToken.encode(list: "friends", ["100"])),
        "sent-garbage": sent("not a token!"),
        "sent-empty": sent(""),
        "made-changes": made("changes", ["1234", "2", id]),
        "made-changes-first-kind": made("changes", ["0", "1", "00000000-0000-0000-0000-000000000000"]),
        "made-reviews": made("reviews", ["20000", "3"]),
        "made-leaderboard": made("leaderboard", ["50"]),
        "made-unicode": made("habits", ["🎉 \"quoted\", with\r\nnewlines"]),
        "base64url": [2] + Array("SGVsbG8sIGhhYml0IQ".utf8),
        "base64-padded": [2] + Array("SGVsbG8sIGhhYml0IQ==".utf8),
    ]
}
