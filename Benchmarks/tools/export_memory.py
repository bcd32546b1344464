"""The data export's memory: a small user and a user with years of daily entries are exported through the gateway
(GatewayService/ExportMyData, Python grpcio) while the gateway's and habits' resident memory is sampled every 5 ms
from /proc. Prints, per user: entries, archive and CSV sizes, export time, and each process's resident memory before
and at its peak. Run by Benchmarks/export.sh (which starts the Postgres and names the executables)."""

import io
import os
import sys
import threading
import time
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Tests", "E2E"))

from gateway_e2e_test import (RPC_TIMEOUT, bearer, gateway_pb2, habits_service_pb2, register,  # noqa: E402
                              service_rows, start_stack)


def resident_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    """The highest resident memory of some processes while it runs."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = pids
        self.peaks = {name: resident_kib(pid) for name, pid in pids.items()}
        self.running = True

    def run(self):
        while self.running:
            for name, pid in self.pids.items():
                self.peaks[name] = max(self.peaks[name], resident_kib(pid))
            time.sleep(0.005)

    def stop(self):
        self.running = False
        self.join()


def seed_user(holder, years, habits):
    """A user with `habits` habits checked in every day for `years` years (entries written with SQL as habits' role:
    seeding, not the measured path)."""
    _, registered = register(holder)
    token = bearer(registered.tokens.access_token)
    for number in range(habits):
        holder.habits.CreateHabit(habits_service_pb2.CreateHabitRequest(name='Habit %d, "daily"' % number),
                                  metadata=token, timeout=RPC_TIMEOUT)
    if years:
        service_rows("habits", """
            UPDATE habits SET created_at = now() - interval '%d years' WHERE user_id = :'user';
            INSERT INTO entries (user_id, id, habit_id, local_date, created_at, change_seq)
            SELECT :'user', gen_random_uuid(), h.id, day::date, day, 1
            FROM habits AS h, generate_series(current_date - %d, current_date - 1, interval '1 day') AS day
            WHERE h.user_id = :'user';
            SELECT count(*) FROM entries WHERE user_id = :'user';
        """ % (years, years * 365), registered.user.id)
    return token


def measure(holder, label, token):
    pids = {name: holder.stack.processes[name].pid for name in ("gateway", "habits")}
    before = {name: resident_kib(pid) for name, pid in pids.items()}
    sampler = Sampler(pids)
    sampler.start()
    started = time.monotonic()
    call = holder.channel.unary_stream(
        "/habitflow.gateway.v1.GatewayService/ExportMyData",
        request_serializer=gateway_pb2.ExportMyDataRequest.SerializeToString,
        response_deserializer=gateway_pb2.ExportMyDataChunk.FromString)
    data = b"".join(chunk.data for chunk in call(gateway_pb2.ExportMyDataRequest(), metadata=token, timeout=600))
    elapsed = time.monotonic() - started
    sampler.stop()
    archive = zipfile.ZipFile(io.BytesIO(data))
    entries = sum(1 for _ in io.TextIOWrapper(archive.open("entries.csv"), encoding="utf-8", newline="")) - 1
    csv_bytes = sum(info.file_size for info in archive.infolist())
    print("%-24s entries %7d  archive %6.1f MB  CSV %6.1f MB  %5.2f s  gateway RSS %5.1f -> peak %5.1f MB (+%4.1f)  "
          "habits RSS %5.1f -> peak %5.1f MB (+%4.1f)" % (
              label, entries, len(data) / 1e6, csv_bytes / 1e6, elapsed,
              before["gateway"] / 1024, sampler.peaks["gateway"] / 1024,
              (sampler.peaks["gateway"] - before["gateway"]) / 1024,
              before["habits"] / 1024, sampler.peaks["habits"] / 1024,
              (sampler.peaks["habits"] - before["habits"]) / 1024))


def main():
    holder = types.SimpleNamespace(cleanups=[])
    holder.addClassCleanup = lambda function, *args: holder.cleanups.append((function, args))
    start_stack(holder)
    try:
        # Warm both processes up (first export, first connections), then measure.
        measure(holder, "warm-up (1 habit)", seed_user(holder, 0, 1))
        measure(holder, "1 habit, no history", seed_user(holder, 0, 1))
        for years, habits in ((1, 10), (5, 5), (5, 15), (10, 15)):
            measure(holder, "%d years x %d habits" % (years, habits), seed_user(holder, years, habits))
    finally:
        for function, args in reversed(holder.cleanups):
            function(*args)


if __name__ == "__main__":
    main()
