public import Foundation

/// The table of contents of a ZIP archive (its central directory): names and sizes, without extracting anything.
/// For showing what an archive holds (the demo lists a data export with it); archives with ZIP64 records or a comment
/// are not read.
public enum ZipDirectory {
    public struct Entry: Hashable, Sendable {
        public var name: String
        public var compressedSize: Int
        public var uncompressedSize: Int
    }

    /// The files of `archive`, in directory order.
    public static func entries(of archive: Data) throws(ZipError) -> [Entry] {
        let bytes = [UInt8](archive)
        let endSize = ZipFormat.endOfCentralDirectorySize
        guard bytes.count >= endSize, bytes.uInt32(at: bytes.count - endSize) == ZipFormat.endOfCentralDirectorySignature
        else { throw unreadable("no end-of-central-directory record at the end (a comment or not a ZIP archive)") }
        let end = bytes.count - endSize
        let count = Int(bytes.uInt16(at: end + 10))
        var offset = Int(bytes.uInt32(at: end + 16))
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            guard offset + ZipFormat.centralDirectoryHeaderSize <= end,
                bytes.uInt32(at: offset) == ZipFormat.centralDirectoryHeaderSignature
            else { throw unreadable("a central directory record is missing or damaged") }
            let nameLength = Int(bytes.uInt16(at: offset + 28))
            let extraLength = Int(bytes.uInt16(at: offset + 30))
            let commentLength = Int(bytes.uInt16(at: offset + 32))
            let nameStart = offset + ZipFormat.centralDirectoryHeaderSize
            guard nameStart + nameLength <= end else { throw unreadable("a file name runs past the directory") }
            entries.append(
                Entry(
                    name: String(decoding: bytes[nameStart..<nameStart + nameLength], as: UTF8.self),
                    compressedSize: Int(bytes.uInt32(at: offset + 20)),
                    uncompressedSize: Int(bytes.uInt32(at: offset + 24))))
            offset = nameStart + nameLength + extraLength + commentLength
        }
        return entries
    }

    private static func unreadable(_ message: String) -> ZipError {
        ZipError(code: .invalidArchive, message: message)
    }
}

extension [UInt8] {
    fileprivate func uInt16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) | UInt16(self[offset + 1]) << 8
    }

    fileprivate func uInt32(at offset: Int) -> UInt32 {
        UInt32(uInt16(at: offset)) | UInt32(uInt16(at: offset + 2)) << 16
    }
}
