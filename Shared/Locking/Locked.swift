public import Synchronization

/// A value behind a lock: the standard library's `Mutex`, which ThreadSanitizer can also see.
///
/// `Mutex` waits on a futex directly, so ThreadSanitizer (which watches pthread locks) sees no ordering between two
/// threads' turns and reports every access inside `withLock` as a race. Built with `-D HABITFLOW_TSAN`
/// (`scripts/sanitize thread` does), each turn also tells ThreadSanitizer it acquired and released this lock; other
/// builds compile to the bare `Mutex`. Use this type instead of `Mutex` everywhere (`scripts/test` checks).
///
/// Inlinable, as `Mutex` is: callers in other modules get the lock specialized to their value, not a generic call.
public struct Locked<Value: ~Copyable>: ~Copyable, Sendable {
    @usableFromInline let mutex: Mutex<Value>
    #if HABITFLOW_TSAN
    /// An object whose address names this lock to ThreadSanitizer (the mutex's own storage cannot be addressed
    /// without an access ThreadSanitizer checks before the lock is taken).
    @usableFromInline let sanitizerIdentity = SanitizerIdentity()
    #endif

    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with the value while holding the lock, as `Mutex.withLock` does.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        try mutex.withLock { (value: inout sending Value) throws(Failure) -> sending Result in
            #if HABITFLOW_TSAN
            let identity = sanitizerIdentity.address
            threadSanitizerAcquire(identity)
            defer { threadSanitizerRelease(identity) }
            #endif
            return try body(&value)
        }
    }
}

#if HABITFLOW_TSAN
@usableFromInline
final class SanitizerIdentity: Sendable {
    @usableFromInline init() {}
    @usableFromInline var address: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
}

// ThreadSanitizer's annotation interface (compiler-rt's tsan_interface.h); its runtime is linked into sanitized builds.
@usableFromInline @_silgen_name("__tsan_acquire")
func threadSanitizerAcquire(_ address: UnsafeMutableRawPointer)
@usableFromInline @_silgen_name("__tsan_release")
func threadSanitizerRelease(_ address: UnsafeMutableRawPointer)
#endif
