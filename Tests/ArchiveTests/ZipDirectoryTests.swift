import Foundation
import NIOCore
import Testing

@testable import HabitFlowArchive

@Suite("ZipDirectory")
struct ZipDirectoryTests {
    /// An archive of `files` as ZipStreamWriter writes it.
    private func archive(_ files: [(name: String, contents: String)]) throws -> Data {
        var writer = ZipStreamWriter(chunkSize: 1024)
        var data = Data()
        for file in files {
            try writer.addFile(named: file.name, modified: Date(timeIntervalSince1970: 1_790_000_000), contents: file.contents)
            for chunk in writer.takeChunks() { data.append(contentsOf: chunk.readableBytesView) }
        }
        try writer.finish()
        for chunk in writer.takeChunks() { data.append(contentsOf: chunk.readableBytesView) }
        return data
    }

    @Test func listsEveryFileWithItsSizesInOrder() throws {
        let csv = String(repeating: "2026-11-27,\"Read, slowly\",1\r\n", count: 500)
        let data = try archive([("profile.csv", "user_id\r\n"), ("entries.csv", csv), ("empty.csv", ""), ("Ünïcode 📚.txt", "x")])
        let entries = try ZipDirectory.entries(of: data)
        #expect(entries.map(\.name) == ["profile.csv", "entries.csv", "empty.csv", "Ünïcode 📚.txt"])
        #expect(entries.map(\.uncompressedSize) == [9, csv.utf8.count, 0, 1])
        // Deflate shrinks the repetitive file; the sizes add up to less than the archive.
        #expect(entries[1].compressedSize < entries[1].uncompressedSize / 10)
        #expect(entries.map(\.compressedSize).reduce(0, +) < data.count)
    }

    @Test func refusesWhatIsNoArchiveOrIsCutShort() throws {
        let data = try archive([("a.csv", "1\r\n"), ("b.csv", "2\r\n")])
        for damaged in [Data(), Data("not a zip".utf8), data.dropLast(), data.dropFirst(10)] {
            #expect {
                try ZipDirectory.entries(of: Data(damaged))
            } throws: { error in
                (error as? ZipError)?.code == .invalidArchive
            }
        }
    }
}
