#include "cli/commands/batch_script.h"

#include <fmt/format.h>

#include "api/task_file.h"
#include "core/text.h"

namespace carma::cli {

namespace {

constexpr std::string_view kDirective = "#SBATCH";

std::vector<std::string_view> lines_of(std::string_view text) {
    std::vector<std::string_view> out;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        out.push_back(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    }
    return out;
}

// The kernel's reading of a #! line: the interpreter, then everything after it as one argument.
std::vector<std::string> shebang_argv(std::string_view line) {
    std::string_view rest = trim(line.substr(2));
    const std::size_t space = rest.find_first_of(" \t");
    std::vector<std::string> argv{std::string(rest.substr(0, space))};
    if (space != std::string_view::npos) {
        if (const std::string_view arg = trim(rest.substr(space)); !arg.empty()) {
            argv.emplace_back(arg);
        }
    }
    return argv;
}

}  // namespace

Result<BatchScript> read_batch_script(std::string_view text, std::string_view source) {
    BatchScript script;
    const std::vector<std::string_view> lines = lines_of(text);
    std::size_t first = 0;
    if (!lines.empty() && lines.front().starts_with("#!")) {
        script.interpreter = shebang_argv(lines.front());
        script.has_shebang = !script.interpreter.front().empty();
        first = 1;
    }
    if (!script.has_shebang) {
        script.interpreter = {"bash"};
    }
    for (std::size_t i = first; i < lines.size(); ++i) {
        std::string_view line = lines[i];
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        const std::string_view t = trim(line);
        if (t.empty()) {
            continue;
        }
        if (!t.starts_with('#')) {
            break;  // the first command: sbatch reads no directive after it
        }
        if (!line.starts_with(kDirective) ||
            (line.size() > kDirective.size() && line[kDirective.size()] != ' ' &&
             line[kDirective.size()] != '\t')) {
            continue;  // a comment ("#SBATCHX", "# SBATCH" and " #SBATCH" are too, as sbatch)
        }
        auto words = api::split_command(line.substr(kDirective.size()));
        if (!words) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{}:{}: {}", source, i + 1, words.error().message));
        }
        ScriptDirective d{static_cast<int>(i + 1), {}};
        for (std::string& w : *words) {
            if (w.starts_with('#')) {
                break;  // "#SBATCH -t 60  # an hour"
            }
            d.words.push_back(std::move(w));
        }
        if (!d.words.empty()) {
            script.directives.push_back(std::move(d));
        }
    }
    return script;
}

bool is_batch_script(std::string_view file_name, const BatchScript& script, bool executable) {
    if (!script.directives.empty()) {
        return true;
    }
    if (executable) {
        return false;
    }
    for (std::string_view ext : {".sh", ".bash", ".sbatch", ".slurm", ".batch", ".job"}) {
        if (file_name.ends_with(ext)) {
            return true;
        }
    }
    return script.has_shebang;
}

std::string directive_option(std::string_view word) {
    if (word.starts_with("--")) {
        return std::string(word.substr(0, word.find('=')));
    }
    if (word.starts_with('-') && word.size() >= 2) {
        return std::string(word.substr(0, 2));
    }
    return std::string(word);
}

}  // namespace carma::cli
