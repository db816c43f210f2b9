// The worker pool of kernels.h: chunks claimed from a counter tagged with the region's generation;
// idle workers spin, then yield, then sleep on a condition variable.
#include "kernels.h"

#include <immintrin.h>
#include <chrono>

namespace openafm {

namespace {
constexpr int SPIN = 2000;                                    // pause iterations before yielding (~10-50 us)
constexpr auto YIELD_FOR = std::chrono::microseconds(2000);   // then sched_yield for up to this long
}

Pool::Pool(int threads) : n_(threads < 1 ? 1 : threads) {
    for (int i = 1; i < n_; ++i) threads_.emplace_back([this] { worker(); });
}

Pool::~Pool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
}

// Claim and run chunks of region `generation` until none is left (or the region is over).
void Pool::work(uint64_t generation) {
    while (true) {
        uint64_t c = claim_.load();
        if ((c >> 32) != (generation & 0xFFFFFFFFu)) return;      // a later region has started
        const int64_t total = total_.load(), chunk = chunk_.load();
        const int64_t begin = (int64_t)(c & 0xFFFFFFFFu);
        if (begin >= total) return;
        if (!claim_.compare_exchange_weak(c, c + (uint64_t)chunk)) continue;
        const int64_t end = std::min(total, begin + chunk);
        (*job_)(begin, end);
        done_.fetch_add(end - begin);
    }
}

void Pool::worker() {
    uint64_t seen = 0;
    while (true) {
        int spins = 0;
        auto yield_start = std::chrono::steady_clock::time_point{};
        while (generation_.load() == seen) {
            if (spins < SPIN) { _mm_pause(); ++spins; continue; }
            auto now = std::chrono::steady_clock::now();
            if (spins == SPIN) { yield_start = now; ++spins; }
            if (now - yield_start < YIELD_FOR) { std::this_thread::yield(); continue; }
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
            sleepers_.fetch_sub(1);
        }
        seen = generation_.load();
        if (stop_.load()) return;
        work(seen);
    }
}

void Pool::parallel_range(int64_t total, int64_t align, const std::function<void(int64_t, int64_t)>& job) {
    if (total <= 0) return;
    if (n_ == 1) { job(0, total); return; }
    const int64_t per = (total + 8 * n_ - 1) / (8 * n_);
    const int64_t chunk = std::max<int64_t>(align, (per + align - 1) / align * align);
    const uint64_t next = generation_.load() + 1;
    // Close the previous region's counter before its fields change: a late worker's claim then fails.
    claim_.store((next & 0xFFFFFFFFu) << 32 | 0xFFFFFFFFu);
    job_ = &job;
    total_.store(total);
    chunk_.store(chunk);
    done_.store(0);
    claim_.store((next & 0xFFFFFFFFu) << 32);
    {
        // Publishing under the mutex keeps a worker from missing the change between its check and its wait.
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.store(next);
    }
    if (sleepers_.load() > 0) wake_.notify_all();
    work(next);
    int spins = 0;
    while (done_.load() < total) {
        if (++spins < SPIN) _mm_pause(); else std::this_thread::yield();
    }
}

}  // namespace openafm
