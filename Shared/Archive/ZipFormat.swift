internal import Foundation
internal import NIOCore

/// The records of a ZIP file (PKWARE APPNOTE 6.3.10, section 4.3) that ``ZipStreamWriter`` writes: no ZIP64, no
/// encryption, one disk. All integers are little-endian.
enum ZipFormat {
    static let localFileHeaderSignature: UInt32 = 0x0403_4b50
    static let dataDescriptorSignature: UInt32 = 0x0807_4b50
    static let centralDirectoryHeaderSignature: UInt32 = 0x0201_4b50
    static let endOfCentralDirectorySignature: UInt32 = 0x0605_4b50

    /// 2.0: deflate and data descriptors (APPNOTE 4.4.3.2).
    static let versionNeeded: UInt16 = 20
    /// Upper byte 3: made on Unix, so readers take the Unix mode from the external attributes; lower byte: 2.0.
    static let versionMadeBy: UInt16 = 3 << 8 | 20
    /// Bit 3: CRC-32 and sizes follow the data, in a data descriptor; bit 11: the name is UTF-8.
    static let flags: UInt16 = 1 << 3 | 1 << 11
    static let methodDeflate: UInt16 = 8
    /// A regular file, `rw-r--r--` (the Unix mode in the upper 16 bits).
    static let externalAttributes: UInt32 = 0o100644 << 16

    static let localFileHeaderSize = 30
    static let dataDescriptorSize = 16
    static let centralDirectoryHeaderSize = 46
    static let endOfCentralDirectorySize = 22

    /// What the central directory records of one file.
    struct Entry {
        var name: [UInt8]
        var modified: DOSDateTime
        var crc32: UInt32 = 0
        var compressedSize: UInt32 = 0
        var uncompressedSize: UInt32 = 0
        var localHeaderOffset: UInt32
    }

    /// The local file header, before the file's data: CRC-32 and sizes are zero (they are in the data descriptor).
    static func writeLocalFileHeader(of entry: Entry, into buffer: inout ByteBuffer) {
        buffer.writeInteger(localFileHeaderSignature, endianness: .little)
        buffer.writeInteger(versionNeeded, endianness: .little)
        buffer.writeInteger(flags, endianness: .little)
        buffer.writeInteger(methodDeflate, endianness: .little)
        buffer.writeInteger(entry.modified.time, endianness: .little)
        buffer.writeInteger(entry.modified.date, endianness: .little)
        buffer.writeInteger(UInt32(0), endianness: .little)  // CRC-32
        buffer.writeInteger(UInt32(0), endianness: .little)  // compressed size
        buffer.writeInteger(UInt32(0), endianness: .little)  // uncompressed size
        buffer.writeInteger(UInt16(entry.name.count), endianness: .little)
        buffer.writeInteger(UInt16(0), endianness: .little)  // extra field length
        buffer.writeBytes(entry.name)
    }

    /// The data descriptor, after the file's data (with the optional signature, which every reader expects).
    static func writeDataDescriptor(of entry: Entry, into buffer: inout ByteBuffer) {
        buffer.writeInteger(dataDescriptorSignature, endianness: .little)
        buffer.writeInteger(entry.crc32, endianness: .little)
        buffer.writeInteger(entry.compressedSize, endianness: .little)
        buffer.writeInteger(entry.uncompressedSize, endianness: .little)
    }

    static func writeCentralDirectoryHeader(of entry: Entry, into buffer: inout ByteBuffer) {
        buffer.writeInteger(centralDirectoryHeaderSignature, endianness: .little)
        buffer.writeInteger(versionMadeBy, endianness: .little)
        buffer.writeInteger(versionNeeded, endianness: .little)
        buffer.writeInteger(flags, endianness: .little)
        buffer.writeInteger(methodDeflate, endianness: .little)
        buffer.writeInteger(entry.modified.time, endianness: .little)
        buffer.writeInteger(entry.modified.date, endianness: .little)
        buffer.writeInteger(entry.crc32, endianness: .little)
        buffer.writeInteger(entry.compressedSize, endianness: .little)
        buffer.writeInteger(entry.uncompressedSize, endianness: .little)
        buffer.writeInteger(UInt16(entry.name.count), endianness: .little)
        buffer.writeInteger(UInt16(0), endianness: .little)  // extra field length
        buffer.writeInteger(UInt16(0), endianness: .little)  // comment length
        buffer.writeInteger(UInt16(0), endianness: .little)  // disk number
        buffer.writeInteger(UInt16(0), endianness: .little)  // internal attributes
        buffer.writeInteger(externalAttributes, endianness: .little)
        buffer.writeInteger(entry.localHeaderOffset, endianness: .little)
        buffer.writeBytes(entry.name)
    }

    static func writeEndOfCentralDirectory(
        entryCount: UInt16, directorySize: UInt32, directoryOffset: UInt32, into buffer: inout ByteBuffer
    ) {
        buffer.writeInteger(endOfCentralDirectorySignature, endianness: .little)
        buffer.writeInteger(UInt16(0), endianness: .little)  // this disk
        buffer.writeInteger(UInt16(0), endianness: .little)  // the disk of the central directory
        buffer.writeInteger(entryCount, endianness: .little)  // entries on this disk
        buffer.writeInteger(entryCount, endianness: .little)  // entries in all
        buffer.writeInteger(directorySize, endianness: .little)
        buffer.writeInteger(directoryOffset, endianness: .little)
        buffer.writeInteger(UInt16(0), endianness: .little)  // comment length
    }
}

/// An MS-DOS date and time, ZIP's modification time: local time by convention, UTC here; whole even seconds, years
/// 1980 to 2107.
struct DOSDateTime: Equatable {
    /// Hours (5 bits), minutes (6 bits), seconds / 2 (5 bits).
    var time: UInt16
    /// Years since 1980 (7 bits), month (4 bits), day (5 bits).
    var date: UInt16

    /// `value` in UTC, rounded down to an even second; before 1980 is 1980-01-01 00:00:00, after 2107 is 2107-12-31
    /// 23:59:58.
    init(_ value: Date) {
        let utc = UTCDateTime(value)
        if utc.date.year < 1980 {
            self.init(year: 1980, month: 1, day: 1, hour: 0, minute: 0, second: 0)
        } else if utc.date.year > 2107 {
            self.init(year: 2107, month: 12, day: 31, hour: 23, minute: 59, second: 58)
        } else {
            self.init(
                year: utc.date.year, month: utc.date.month, day: utc.date.day, hour: utc.hour, minute: utc.minute,
                second: utc.second)
        }
    }

    private init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        time = UInt16(hour << 11 | minute << 5 | second / 2)
        date = UInt16((year - 1980) << 9 | month << 5 | day)
    }
}
