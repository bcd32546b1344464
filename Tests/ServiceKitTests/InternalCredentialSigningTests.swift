@testable import HabitFlowInternalCredential
import Foundation
import HabitFlowRPC
import Testing

/// The internal credential's signing, which the gateway does for every forwarded call.
@Suite struct InternalCredentialSigningTests {
    @Test func credentialsSignedWithinOneSecondVerifyForTheirOwnCallOnly() throws {
        let credential = InternalCredential(secret: "signing-cache")
        let getHabit = MethodDescriptor(service: "habitflow.habits.v1.HabitsService", method: "GetHabit")
        let listHabits = MethodDescriptor(service: "habitflow.habits.v1.HabitsService", method: "ListHabits")
        let now = Date()
        let alice = CallerIdentity(caller: "gateway", userID: UUID(), sessionID: "a", clientAddress: "192.0.2.1")
        let bob = CallerIdentity(caller: "gateway", userID: UUID(), sessionID: "b", clientAddress: "192.0.2.1")
        let first = credential.metadata(for: alice, method: getHabit, now: now)
        let again = credential.metadata(for: alice, method: getHabit, now: now)
        // The same credential within the second (made once, see SignatureCache)...
        #expect(first == again)
        // ...but never another caller's or another method's.
        let forBob = credential.metadata(for: bob, method: getHabit, now: now)
        let forList = credential.metadata(for: alice, method: listHabits, now: now)
        #expect(first[InternalCredential.Key.signature] != forBob[InternalCredential.Key.signature])
        #expect(first[InternalCredential.Key.signature] != forList[InternalCredential.Key.signature])
        #expect(try credential.verify(first, method: getHabit, now: now) == alice)
        #expect(try credential.verify(forBob, method: getHabit, now: now) == bob)
        #expect(try credential.verify(forList, method: listHabits, now: now) == alice)
        #expect(throws: RPCError.self) { try credential.verify(forList, method: getHabit, now: now) }
        // The next second signs anew; an earlier second (a slow caller) still gets a valid credential.
        let later = credential.metadata(for: alice, method: getHabit, now: now.addingTimeInterval(1))
        #expect(later[InternalCredential.Key.signature] != first[InternalCredential.Key.signature])
        #expect(try credential.verify(later, method: getHabit, now: now) == alice)
        let earlier = credential.metadata(for: alice, method: getHabit, now: now.addingTimeInterval(-1))
        #expect(try credential.verify(earlier, method: getHabit, now: now) == alice)
        // Another secret does not verify it, cache or not.
        #expect(throws: RPCError.self) {
            try InternalCredential(secret: "another").verify(first, method: getHabit, now: now)
        }
    }

    @Test func theSignatureCacheHoldsOneSecondAtMostCapacityEntries() {
        let cache = SignatureCache(capacity: 2)
        var computed = 0
        func sign(_ text: String, second: Int64) -> String {
            cache.signature(of: Array(text.utf8), second: second) {
                computed += 1
                return "signature of \(text) at \(second)"
            }
        }
        #expect(sign("a", second: 10) == "signature of a at 10")
        #expect(sign("a", second: 10) == "signature of a at 10")
        #expect(computed == 1)
        _ = sign("b", second: 10)
        _ = sign("c", second: 10)  // over capacity: computed, not kept
        _ = sign("c", second: 10)
        #expect(computed == 4)
        #expect(sign("a", second: 11) == "signature of a at 11")
        #expect(sign("a", second: 10) == "signature of a at 10")  // an older second is computed, never served stale
        #expect(sign("a", second: 11) == "signature of a at 11")
        #expect(computed == 6)
    }
}
