// outcore/device/event.hpp — a point in a queue's work that others can wait for.
//
//   auto done = device.create_event();
//   upload.upload(src, slot);
//   upload.record(*done);        // signals when the upload has finished
//   compute.wait(*done);         // compute's later work starts after it
//   done->wait();                // or the host blocks on it
//
// Semantics follow CUDA events: a wait targets the most recent record made before
// the wait was issued; an event never recorded counts as complete.
#pragma once

namespace outcore {

class Event {
public:
    Event() = default;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    virtual ~Event() = default;

    /// Blocks the calling thread until the last record has completed. If the queue's
    /// work up to that point failed, rethrows that failure. Thread-safe.
    void wait() { do_wait(); }
    /// True when the last record has completed (or there was none). Never blocks.
    [[nodiscard]] bool query() { return do_query(); }

private:
    virtual void do_wait() = 0;
    virtual bool do_query() = 0;
};

}  // namespace outcore
