; tilefuse native parallel-for runtime (hand-written LLVM IR, opaque pointers).
;
; Exported:
;   void    tilefuse_parallel_for(void (*body)(int64_t, int64_t, void *), void *closure, int64_t n);
;   void    tilefuse_set_num_threads(int32_t n);   /* n >= 1, checked by Python */
;   int32_t tilefuse_pool_num_workers(void);       /* worker threads started so far (for tests) */
;
; Design (pseudo-C; every function below repeats its own piece):
;   - Worker threads are created lazily by the first launch that needs them and
;     are never joined (detached).  Worker k (k = 1, 2, ...) runs chunk k.
;   - A launch publishes the task in plain globals, sets `pending` to the number
;     of workers and bumps the generation counter `gen`.  EVERY worker
;     acknowledges EVERY generation (decrements `pending`), also those whose
;     index is >= the number of chunks; so no worker can lag behind into the
;     next launch and read a half-written task.
;   - Idle workers spin on `gen` with `pause` for ~2^21 TSC cycles (< 1 ms at
;     >= 2.1 GHz; from ~30 us on they also sched_yield() each round, so a
;     launcher the scheduler put on the same CPU is not starved for a whole
;     time slice), then sleep in FUTEX_WAIT on `gen`.  `sleepers` counts the
;     sleepers; launcher and workers access `gen`/`sleepers` with seq_cst so that
;     either the worker sees the new `gen` or the launcher sees the sleeper:
;         worker:   sleepers++ (sc); if (gen == seen) futex_wait(&gen, seen);
;         launcher: gen++ (sc);      if (sleepers) futex_wake(&gen, INT_MAX);
;     The kernel re-checks `gen == seen` atomically inside FUTEX_WAIT.
;   - Memory ordering: task globals are written before the seq_cst (hence
;     release) `gen++`, read by workers after an acquire load that saw the new
;     gen.  Workers decrement `pending` with release after running the body;
;     the launcher spins with acquire loads until it sees 0, which makes all
;     body writes visible to the caller.  The task globals are rewritten only
;     after that, so workers never race with the next launch.  After ~30 us of
;     spinning the launcher calls sched_yield() between checks, so a worker
;     that shares the caller's CPU (oversubscribed machine) gets to run.
;   - `busy` (cmpxchg 0 -> 1 acquire, store 0 release) serialises launches; a
;     launch that finds the pool busy (nested parallel loop, or a second
;     calling thread) runs body(0, n, closure) serially instead.
;   - fork: a child handler registered with __register_atfork marks the pool
;     not started and not busy, so a forked child starts a fresh pool.

; ---------------------------------------------------------------------------
; Pool state.  Each hot word gets its own cache line (align 64).
; ---------------------------------------------------------------------------
@pool_nthreads = internal global i32 1, align 64   ; requested threads (incl. caller)
@pool_nworkers = internal global i32 0, align 64   ; workers alive; 0 = not started.  Written only while holding `busy` (or in the fork child)
@pool_atfork   = internal global i32 0, align 4    ; atfork handler registered?
@pool_busy     = internal global i32 0, align 64   ; 1 while a launch owns the pool
@pool_gen      = internal global i32 0, align 64   ; generation counter == futex word
@pool_sleepers = internal global i32 0, align 64   ; workers in (or entering) FUTEX_WAIT
@pool_pending  = internal global i32 0, align 64   ; workers that have not acked this generation

; The task of the current generation (plain globals, see ordering notes above).
@task_body     = internal global ptr null, align 64
@task_closure  = internal global ptr null, align 8
@task_n        = internal global i64 0, align 8
@task_nchunks  = internal global i64 0, align 8

; ---------------------------------------------------------------------------
; External functions (all in glibc >= 2.34's libc.so.6).
; ---------------------------------------------------------------------------
declare i64 @syscall(i64, ...)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i32 @sched_yield()
; pthread_atfork itself lives in libc_nonshared.a (it passes __dso_handle), so
; dlsym cannot find it; __register_atfork is the exported function behind it.
declare i32 @__register_atfork(ptr, ptr, ptr, ptr)
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()
declare i64 @llvm.umin.i64(i64, i64)

; ---------------------------------------------------------------------------
; static void run_chunk(body, closure, n, nchunks, c) {
;     /* balanced static split: the first n % nchunks chunks get one extra */
;     int64_t q = n / nchunks, r = n % nchunks;
;     int64_t begin = c * q + min(c, r);
;     int64_t end   = begin + q + (c < r);
;     body(begin, end, closure);
; }
; ---------------------------------------------------------------------------
define internal void @run_chunk(ptr %body, ptr %closure, i64 %n, i64 %nchunks, i64 %c) {
entry:
  %q = udiv i64 %n, %nchunks
  %r = urem i64 %n, %nchunks
  %cq = mul i64 %c, %q
  %extra = call i64 @llvm.umin.i64(i64 %c, i64 %r)
  %begin = add i64 %cq, %extra
  %lt = icmp ult i64 %c, %r
  %one = zext i1 %lt to i64
  %len = add i64 %q, %one
  %end = add i64 %begin, %len
  call void %body(i64 %begin, i64 %end, ptr %closure)
  ret void
}

; ---------------------------------------------------------------------------
; static void *worker_main(void *arg) {
;     uint64_t a = (uint64_t)arg;              /* (index << 32) | gen at creation */
;     uint64_t idx = a >> 32;
;     uint32_t seen = (uint32_t)a;
;     for (;;) {
;         uint64_t t0 = rdtsc();
;         uint32_t g;
;         while ((g = atomic_load_acquire(&gen)) == seen) {
;             uint64_t dt = rdtsc() - t0;
;             if (dt <= SPIN_CYCLES) {
;                 /* after ~30 us spin politely: let a launcher sharing our CPU run */
;                 if (dt > YIELD_AFTER_CYCLES) sched_yield();
;                 pause();
;                 continue;
;             }
;             atomic_fetch_add_seq_cst(&sleepers, 1);
;             if (atomic_load_seq_cst(&gen) == seen)
;                 syscall(SYS_futex, &gen, FUTEX_WAIT_PRIVATE, seen, NULL);
;             atomic_fetch_sub_seq_cst(&sleepers, 1);
;             /* t0 is stale now: a spurious wake-up goes straight back to sleep */
;         }
;         seen = g;
;         if (idx < task_nchunks)
;             run_chunk(task_body, task_closure, task_n, task_nchunks, idx);
;         atomic_fetch_sub_release(&pending, 1);
;     }
; }
; ---------------------------------------------------------------------------
define internal ptr @worker_main(ptr %arg) {
entry:
  %a = ptrtoint ptr %arg to i64
  %idx = lshr i64 %a, 32
  %seen0 = trunc i64 %a to i32
  br label %wait

wait:
  %seen = phi i32 [ %seen0, %entry ], [ %g, %done ]
  %t0 = call i64 @llvm.readcyclecounter()
  br label %spin

spin:
  %g = load atomic i32, ptr @pool_gen acquire, align 64
  %changed = icmp ne i32 %g, %seen
  br i1 %changed, label %work, label %spin.check

spin.check:
  %t = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t, %t0
  %tired = icmp ugt i64 %dt, 2097152            ; SPIN_CYCLES = 2^21
  br i1 %tired, label %sleep, label %spin.polite

spin.polite:
  %long = icmp ugt i64 %dt, 65536               ; YIELD_AFTER_CYCLES = 2^16
  br i1 %long, label %spin.yield, label %spin.pause

spin.yield:
  %y = call i32 @sched_yield()
  br label %spin.pause

spin.pause:
  call void @llvm.x86.sse2.pause()
  br label %spin

sleep:
  %s0 = atomicrmw add ptr @pool_sleepers, i32 1 seq_cst, align 64
  %g2 = load atomic i32, ptr @pool_gen seq_cst, align 64
  %still = icmp eq i32 %g2, %seen
  br i1 %still, label %sleep.wait, label %sleep.done

sleep.wait:
  %seen64 = zext i32 %seen to i64
  ; syscall(SYS_futex = 202, &gen, FUTEX_WAIT_PRIVATE = 128, seen, NULL)
  %rw = call i64 (i64, ...) @syscall(i64 202, ptr @pool_gen, i64 128, i64 %seen64, ptr null)
  br label %sleep.done

sleep.done:
  %s1 = atomicrmw sub ptr @pool_sleepers, i32 1 seq_cst, align 64
  br label %spin

work:
  %nchunks = load i64, ptr @task_nchunks, align 8
  %mine = icmp ult i64 %idx, %nchunks
  br i1 %mine, label %run, label %done

run:
  %body = load ptr, ptr @task_body, align 64
  %closure = load ptr, ptr @task_closure, align 8
  %n = load i64, ptr @task_n, align 8
  call void @run_chunk(ptr %body, ptr %closure, i64 %n, i64 %nchunks, i64 %idx)
  br label %done

done:
  %p = atomicrmw sub ptr @pool_pending, i32 1 release, align 64
  br label %wait
}

; ---------------------------------------------------------------------------
; /* fork child: no workers exist in the child; start afresh on next launch */
; static void pool_atfork_child(void) {
;     nworkers = 0; busy = 0; sleepers = 0; pending = 0;
; }
; ---------------------------------------------------------------------------
define internal void @pool_atfork_child() {
entry:
  store atomic i32 0, ptr @pool_nworkers monotonic, align 64
  store atomic i32 0, ptr @pool_busy monotonic, align 64
  store atomic i32 0, ptr @pool_sleepers monotonic, align 64
  store atomic i32 0, ptr @pool_pending monotonic, align 64
  ret void
}

; ---------------------------------------------------------------------------
; /* Called with `busy` held.  Returns the number of workers now alive. */
; static int32_t pool_grow(int32_t want) {
;     if (!atfork_registered) {
;         __register_atfork(NULL, NULL, pool_atfork_child, NULL);
;         atfork_registered = 1;
;     }
;     uint32_t g = gen;                    /* only the launcher writes gen */
;     int32_t nw = nworkers;
;     for (; nw < want; nw++) {
;         pthread_t tid;
;         void *arg = (void *)(((uint64_t)(nw + 1) << 32) | g);
;         if (pthread_create(&tid, NULL, worker_main, arg) != 0) break;
;         pthread_detach(tid);
;     }
;     nworkers = nw;
;     return nw;
; }
; ---------------------------------------------------------------------------
define internal i32 @pool_grow(i32 %want) {
entry:
  %tid = alloca i64, align 8
  %reg = load i32, ptr @pool_atfork, align 4
  %isreg = icmp ne i32 %reg, 0
  br i1 %isreg, label %start, label %register

register:
  %ra = call i32 @__register_atfork(ptr null, ptr null, ptr @pool_atfork_child, ptr null)
  store i32 1, ptr @pool_atfork, align 4
  br label %start

start:
  %g = load atomic i32, ptr @pool_gen monotonic, align 64
  %g64 = zext i32 %g to i64
  %nw0 = load atomic i32, ptr @pool_nworkers monotonic, align 64
  br label %loop

loop:
  %nw = phi i32 [ %nw0, %start ], [ %nw1, %created ]
  %more = icmp slt i32 %nw, %want
  br i1 %more, label %create, label %exit

create:
  %nw1 = add i32 %nw, 1
  %idx64 = zext i32 %nw1 to i64
  %hi = shl i64 %idx64, 32
  %packed = or i64 %hi, %g64
  %arg = inttoptr i64 %packed to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @worker_main, ptr %arg)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %created, label %exit

created:
  %t = load i64, ptr %tid, align 8
  %rd = call i32 @pthread_detach(i64 %t)
  br label %loop

exit:
  %nwf = phi i32 [ %nw, %loop ], [ %nw, %create ]
  store atomic i32 %nwf, ptr @pool_nworkers monotonic, align 64
  ret i32 %nwf
}

; ---------------------------------------------------------------------------
; void tilefuse_parallel_for(body, closure, n) {
;     if (n <= 0) return;
;     int32_t nt = atomic_load_relaxed(&nthreads);
;     if (n == 1 || nt <= 1) goto serial;
;     if (!cmpxchg_acquire(&busy, 0, 1)) goto serial;     /* nested / concurrent */
;     int32_t nw = nworkers;
;     if (nw < nt - 1) nw = pool_grow(nt - 1);
;     if (nw == 0) { atomic_store_release(&busy, 0); goto serial; }
;     int64_t nchunks = min(n, nw + 1, nt);
;     task_body = body; task_closure = closure; task_n = n; task_nchunks = nchunks;
;     atomic_store_relaxed(&pending, nw);                 /* every worker acks */
;     atomic_fetch_add_seq_cst(&gen, 1);                  /* publish */
;     if (atomic_load_seq_cst(&sleepers) != 0)
;         syscall(SYS_futex, &gen, FUTEX_WAKE_PRIVATE, INT_MAX);
;     run_chunk(body, closure, n, nchunks, 0);            /* caller takes chunk 0 */
;     uint64_t t0 = rdtsc();
;     while (atomic_load_acquire(&pending) != 0)
;         /* spin; after ~30 us yield the CPU: a worker may be waiting for it */
;         if (rdtsc() - t0 <= JOIN_SPIN_CYCLES) pause(); else sched_yield();
;     atomic_store_release(&busy, 0);
;     return;
; serial:
;     body(0, n, closure);
; }
; ---------------------------------------------------------------------------
define void @tilefuse_parallel_for(ptr %body, ptr %closure, i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %ret, label %check

check:
  %nt = load atomic i32, ptr @pool_nthreads monotonic, align 64
  %n1 = icmp eq i64 %n, 1
  %nt1 = icmp sle i32 %nt, 1
  %inline = or i1 %n1, %nt1
  br i1 %inline, label %serial, label %acquire

acquire:
  %cx = cmpxchg ptr @pool_busy, i32 0, i32 1 acquire monotonic, align 64
  %got = extractvalue { i32, i1 } %cx, 1
  br i1 %got, label %ensure, label %serial

ensure:
  %want = sub i32 %nt, 1
  %nwc = load atomic i32, ptr @pool_nworkers monotonic, align 64
  %short = icmp slt i32 %nwc, %want
  br i1 %short, label %grow, label %launch

grow:
  %nwg = call i32 @pool_grow(i32 %want)
  br label %launch

launch:
  %nw = phi i32 [ %nwc, %ensure ], [ %nwg, %grow ]
  %none = icmp eq i32 %nw, 0
  br i1 %none, label %giveup, label %publish

giveup:
  store atomic i32 0, ptr @pool_busy release, align 64
  br label %serial

publish:
  %nw64 = zext i32 %nw to i64
  %teamw = add i64 %nw64, 1
  %nt64 = zext i32 %nt to i64
  %team = call i64 @llvm.umin.i64(i64 %teamw, i64 %nt64)
  %nchunks = call i64 @llvm.umin.i64(i64 %team, i64 %n)
  store ptr %body, ptr @task_body, align 64
  store ptr %closure, ptr @task_closure, align 8
  store i64 %n, ptr @task_n, align 8
  store i64 %nchunks, ptr @task_nchunks, align 8
  store atomic i32 %nw, ptr @pool_pending monotonic, align 64
  %gold = atomicrmw add ptr @pool_gen, i32 1 seq_cst, align 64
  %sl = load atomic i32, ptr @pool_sleepers seq_cst, align 64
  %anysleep = icmp ne i32 %sl, 0
  br i1 %anysleep, label %wake, label %mychunk

wake:
  ; syscall(SYS_futex = 202, &gen, FUTEX_WAKE_PRIVATE = 129, INT_MAX)
  %rw = call i64 (i64, ...) @syscall(i64 202, ptr @pool_gen, i64 129, i64 2147483647)
  br label %mychunk

mychunk:
  call void @run_chunk(ptr %body, ptr %closure, i64 %n, i64 %nchunks, i64 0)
  %j0 = call i64 @llvm.readcyclecounter()
  br label %join

join:
  %p = load atomic i32, ptr @pool_pending acquire, align 64
  %finished = icmp eq i32 %p, 0
  br i1 %finished, label %release, label %join.check

join.check:
  %jt = call i64 @llvm.readcyclecounter()
  %jdt = sub i64 %jt, %j0
  %jlong = icmp ugt i64 %jdt, 65536              ; JOIN_SPIN_CYCLES = 2^16
  br i1 %jlong, label %join.yield, label %join.pause

join.pause:
  call void @llvm.x86.sse2.pause()
  br label %join

join.yield:
  %y = call i32 @sched_yield()
  br label %join

release:
  store atomic i32 0, ptr @pool_busy release, align 64
  br label %ret

serial:
  call void %body(i64 0, i64 %n, ptr %closure)
  br label %ret

ret:
  ret void
}

; void tilefuse_set_num_threads(int32_t n) { atomic_store_relaxed(&nthreads, n); }
; Takes effect at the next launch; workers beyond n - 1 stay alive but idle
; (they still acknowledge each generation, without running a chunk).
define void @tilefuse_set_num_threads(i32 %n) {
entry:
  store atomic i32 %n, ptr @pool_nthreads monotonic, align 64
  ret void
}

; int32_t tilefuse_pool_num_workers(void) { return nworkers; }   /* racy snapshot, for tests */
define i32 @tilefuse_pool_num_workers() {
entry:
  %nw = load atomic i32, ptr @pool_nworkers monotonic, align 64
  ret i32 %nw
}
