// A C++17 user of devipc.h: every handle lives in a std::unique_ptr whose deleter is the
// handle's own free call, and failures become exceptions carrying the last error. One
// process exports a buffer and a signal, imports them back (the same-process path), and
// every handle is released by scope, in any order.
//
// usage: raii hip|ascend
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "devipc.h"

namespace devipc {

struct Error : std::runtime_error {
    devipc_status status;
    Error(devipc_status s, const std::string &what) : std::runtime_error(what), status(s) {}
};

inline void check(devipc_status s, const char *call) {
    if (s == DEVIPC_OK) return;
    size_t needed = 0;
    devipc_last_error_message(nullptr, 0, &needed);
    std::string msg(needed, '\0');
    devipc_last_error_message(msg.data(), msg.size(), nullptr);
    msg.resize(needed ? needed - 1 : 0);
    throw Error(s, std::string(call) + ": " + devipc_status_name(s) + ": " + msg);
}

// The deleter of handle type T: its own free call (which NULLs the pointer it is given).
template <typename T, devipc_status (*Free)(T **)>
struct Deleter {
    void operator()(T *p) const noexcept { Free(&p); }
};

using Runtime = std::unique_ptr<devipc_runtime, Deleter<devipc_runtime, devipc_runtime_free>>;
using Buffer = std::unique_ptr<devipc_buffer, Deleter<devipc_buffer, devipc_buffer_free>>;
using Import = std::unique_ptr<devipc_import, Deleter<devipc_import, devipc_import_close>>;
using MemToken =
    std::unique_ptr<devipc_mem_token, Deleter<devipc_mem_token, devipc_mem_token_free>>;
using Signal = std::unique_ptr<devipc_signal, Deleter<devipc_signal, devipc_signal_free>>;
using SignalToken = std::unique_ptr<devipc_signal_token,
                                    Deleter<devipc_signal_token, devipc_signal_token_free>>;
using Stream = std::unique_ptr<devipc_stream, Deleter<devipc_stream, devipc_stream_free>>;
using Span = std::unique_ptr<devipc_span, Deleter<devipc_span, devipc_span_free>>;
using Request = std::unique_ptr<devipc_request, Deleter<devipc_request, devipc_request_free>>;
using Event = std::unique_ptr<devipc_event, Deleter<devipc_event, devipc_event_free>>;

// Calls `make(&raw)` and wraps the new handle.
template <typename Owner, typename Make>
Owner make(Make make, const char *call) {
    typename Owner::pointer raw = nullptr;
    check(make(&raw), call);
    return Owner(raw);
}

inline std::string text(const devipc_mem_token *tok) {
    size_t needed = 0;
    devipc_mem_token_to_text(tok, nullptr, 0, &needed);
    std::string s(needed, '\0');
    check(devipc_mem_token_to_text(tok, s.data(), s.size(), nullptr), "to_text");
    s.resize(needed - 1);
    return s;
}

}  // namespace devipc

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const devipc_backend_kind kind =
        std::strcmp(argv[1], "ascend") == 0 ? DEVIPC_BACKEND_ASCEND : DEVIPC_BACKEND_HIP;
    try {
        using namespace devipc;
        auto rt = make<Runtime>(
            [&](devipc_runtime **out) { return devipc_runtime_open_emulated(kind, out); },
            "open");
        auto buf = make<Buffer>(
            [&](devipc_buffer **out) { return devipc_runtime_allocate(rt.get(), 0, 1 << 16, out); },
            "allocate");
        const std::string hello = "hello from C++";
        check(devipc_buffer_write(buf.get(), 0, hello.data(), hello.size()), "write");
        devipc_export_options opts;
        check(devipc_export_options_init(&opts), "options");
        opts.flags = DEVIPC_EXPORT_ANY_PROCESS;
        auto tok = make<MemToken>(
            [&](devipc_mem_token **out) { return devipc_buffer_export(buf.get(), &opts, out); },
            "export");
        const std::string wire = text(tok.get());
        auto parsed = make<MemToken>(
            [&](devipc_mem_token **out) { return devipc_mem_token_from_text(wire.c_str(), out); },
            "parse");
        auto imp = make<Import>(
            [&](devipc_import **out) {
                return devipc_runtime_import(rt.get(), parsed.get(), 0, out);
            },
            "import");
        rt.reset();   // the buffer and the import keep the backend
        buf.reset();  // the import keeps the memory
        std::vector<char> back(hello.size());
        check(devipc_import_read(imp.get(), 0, back.data(), back.size()), "read");
        if (std::string(back.begin(), back.end()) != hello) throw std::runtime_error("bytes differ");

        // The data plane: a stream-ordered read of the import, through RAII handles.
        auto rt3 = make<Runtime>(
            [&](devipc_runtime **out) { return devipc_runtime_open_emulated(kind, out); },
            "open");
        auto stream = make<Stream>(
            [&](devipc_stream **out) { return devipc_runtime_create_stream(rt3.get(), 0, out); },
            "stream");
        auto span = make<Span>(
            [&](devipc_span **out) {
                return devipc_import_span(imp.get(), 0, hello.size(), out);
            },
            "span");
        auto read = make<Request>(
            [&](devipc_request **out) { return devipc_stream_read(stream.get(), span.get(), out); },
            "stream read");
        auto event = make<Event>(
            [&](devipc_event **out) { return devipc_runtime_create_event(rt3.get(), 0, out); },
            "event");
        check(devipc_stream_record(stream.get(), event.get()), "record");
        span.reset();  // the request keeps the memory
        std::vector<char> host(hello.size());
        check(devipc_request_take_host(read.get(), host.data(), host.size(), nullptr), "take");
        if (std::string(host.begin(), host.end()) != hello) throw std::runtime_error("read differs");
        check(devipc_event_wait(event.get(), 10000), "event wait");

        // An exception carries the status and the whole message.
        try {
            make<MemToken>(
                [](devipc_mem_token **out) { return devipc_mem_token_from_text("nope", out); },
                "parse");
            throw std::runtime_error("a bad token parsed");
        } catch (const Error &e) {
            if (e.status != DEVIPC_ERR_INVALID_TOKEN) throw;
            if (std::strstr(e.what(), "invalid devipc token") == nullptr) throw;
        }

        auto rt2 = make<Runtime>(
            [&](devipc_runtime **out) { return devipc_runtime_open_emulated(kind, out); },
            "open");
        auto sig = make<Signal>(
            [&](devipc_signal **out) { return devipc_runtime_create_signal(rt2.get(), 0, out); },
            "signal");
        auto stok = make<SignalToken>(
            [&](devipc_signal_token **out) { return devipc_signal_export(sig.get(), nullptr, out); },
            "export signal");
        auto same = make<Signal>(
            [&](devipc_signal **out) {
                return devipc_runtime_import_signal(rt2.get(), stok.get(), 0, out);
            },
            "import signal");
        check(devipc_signal_notify(sig.get()), "notify");
        check(devipc_signal_wait(same.get(), 10000), "wait");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAILED: %s\n", e.what());
        return 1;
    }
    if (devipc_live_handles() != 0) {
        std::fprintf(stderr, "FAILED: %zu handles left\n", devipc_live_handles());
        return 1;
    }
    std::printf("PASS raii %s\n", argv[1]);
    return 0;
}
