// The v2 fence's device filter. cgroup v2 has no devices controller: the kernel instead asks the
// BPF_PROG_TYPE_CGROUP_DEVICE programs attached to a process's cgroup (and, with
// BPF_F_ALLOW_MULTI, its ancestors') before a device file is opened or made, and denies the
// access if any of them returns 0. The program is a handful of raw instructions loaded through
// the bpf() system call, so no libbpf and no compiler for BPF are needed.

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/cgroup_internal.h"
#include "exec/fd.h"

namespace carma::exec::cgroup {

namespace {

bpf_insn insn(std::uint8_t code, std::uint8_t dst, std::uint8_t src, std::int16_t off,
              std::int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

// r_dst = *(u32 *)(r_src + off)
bpf_insn load_word(std::uint8_t dst, std::uint8_t src, std::int16_t off) {
    return insn(BPF_LDX | BPF_W | BPF_MEM, dst, src, off, 0);
}
// if r_dst != imm: skip `off` instructions
bpf_insn jump_if_not(std::uint8_t dst, std::int32_t imm, std::int16_t off) {
    return insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm);
}
// return value (two instructions: r0 = value; exit)
void append_return(std::vector<bpf_insn>& out, std::int32_t value) {
    out.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, value));
    out.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
}

// The program, given the context struct bpf_cgroup_dev_ctx { u32 access_type; u32 major;
// u32 minor; } in r1, where access_type is (access << 16) | device type:
//     r2 = ctx->access_type & 0xffff;  r3 = ctx->major;  r4 = ctx->minor;
//     for each denied device: if (r2 == type && r3 == major && r4 == minor) return 0;
//     return 1;
// Every access (read, write, mknod) to a denied device is refused; all others are left to the
// ancestors' programs and to the file's permissions.
std::vector<bpf_insn> deny_program(const std::vector<DeviceNumber>& deny) {
    std::vector<bpf_insn> p = {
        load_word(BPF_REG_2, BPF_REG_1, 0),
        insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff),
        load_word(BPF_REG_3, BPF_REG_1, 4),
        load_word(BPF_REG_4, BPF_REG_1, 8),
    };
    for (const DeviceNumber& d : deny) {
        const std::int32_t type = d.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
        // Each test skips the rest of this device's block (the tests after it, r0 = 0, exit).
        p.push_back(jump_if_not(BPF_REG_2, type, 4));
        p.push_back(jump_if_not(BPF_REG_3, d.major, 3));
        p.push_back(jump_if_not(BPF_REG_4, d.minor, 2));
        append_return(p, 0);
    }
    append_return(p, 1);
    return p;
}

long bpf(int cmd, bpf_attr& attr) {
    return ::syscall(SYS_bpf, cmd, &attr, sizeof attr);
}

std::string load_hint(int err) {
    if (err == EPERM || err == EACCES) {
        return "loading a BPF program needs CAP_BPF and CAP_SYS_ADMIN (run the daemon as root); "
               "on Linux before 5.11 it is also charged to RLIMIT_MEMLOCK "
               "(LimitMEMLOCK=infinity in the unit), or set `fences: off`";
    }
    if (err == EINVAL) {
        return "the kernel needs CONFIG_CGROUP_BPF for device filters on cgroup v2, or set "
               "`fences: off`";
    }
    return "or set `fences: off`";
}

Result<Fd> load(const std::vector<bpf_insn>& program) {
    static const char kLicense[] = "GPL";
    auto attempt = [&](char* log, std::uint32_t log_size) {
        bpf_attr attr{};
        attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
        attr.insns = reinterpret_cast<std::uint64_t>(program.data());
        attr.insn_cnt = static_cast<std::uint32_t>(program.size());
        attr.license = reinterpret_cast<std::uint64_t>(kLicense);
        attr.log_buf = reinterpret_cast<std::uint64_t>(log);
        attr.log_size = log_size;
        attr.log_level = log != nullptr ? 1 : 0;
        std::strncpy(attr.prog_name, "carma_fence", sizeof attr.prog_name - 1);
        return static_cast<int>(bpf(BPF_PROG_LOAD, attr));
    };
    int fd = attempt(nullptr, 0);
    if (fd >= 0) {
        return Fd(fd);
    }
    const int err = errno;
    // Again with the verifier's log, which says why a program was refused.
    std::vector<char> log(16384, '\0');
    if (int again = attempt(log.data(), static_cast<std::uint32_t>(log.size())); again >= 0) {
        return Fd(again);
    }
    const std::string verifier(trim(std::string_view(log.data())));
    return fail(
        err == EPERM || err == EACCES ? ErrorCode::Forbidden : ErrorCode::Io,
        fmt::format("cannot load the device filter (bpf BPF_PROG_LOAD of a "
                    "BPF_PROG_TYPE_CGROUP_DEVICE program): {}{}; {}",
                    errno_text(err), verifier.empty() ? "" : " (verifier: " + verifier + ")",
                    load_hint(err)));
}

}  // namespace

Result<void> attach_device_filter(const std::string& cgroup_dir,
                                  const std::vector<DeviceNumber>& deny) {
    auto program = load(deny_program(deny));
    if (!program) {
        return tl::unexpected(program.error());
    }
    Fd dir(::open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0) {
        return file_fail("open cgroup", cgroup_dir, errno);
    }
    bpf_attr attr{};
    attr.target_fd = static_cast<std::uint32_t>(dir.get());
    attr.attach_bpf_fd = static_cast<std::uint32_t>(program->get());
    attr.attach_type = BPF_CGROUP_DEVICE;
    // Multi: the program joins those of the ancestors (systemd's DevicePolicy, a container's
    // filter) instead of overriding them, and an ancestor's multi program does not refuse it.
    attr.attach_flags = BPF_F_ALLOW_MULTI;
    if (bpf(BPF_PROG_ATTACH, attr) != 0) {
        const int err = errno;
        return fail(err == EPERM || err == EACCES ? ErrorCode::Forbidden : ErrorCode::Io,
                    fmt::format("cannot attach the device filter to {} (bpf BPF_PROG_ATTACH, "
                                "BPF_CGROUP_DEVICE): {}; {}",
                                cgroup_dir, errno_text(err),
                                err == EPERM ? "run the daemon as root; an ancestor cgroup with a "
                                               "device program that allows no other (attached "
                                               "without BPF_F_ALLOW_MULTI or _OVERRIDE) also "
                                               "refuses it, or set `fences: off`"
                                             : load_hint(err)));
    }
    // The cgroup holds the program now; closing our descriptor does not detach it, and removing
    // the cgroup frees it.
    return {};
}

}  // namespace carma::exec::cgroup
