// Reading a YAML task file (api/task_file.h): exactly one document, walked as events first so
// that yaml-cpp cannot loop on malformed input, then a mapping whose fields task_file_fields.cpp
// checks; what the file leaves out gets the context's defaults.

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "api/task_file_internal.h"

namespace carma::api {

namespace {

// Counts what one document holds without building it: where the document starts (to tell
// whether the parser moved at all) and where its first node is (the line an error names).
class DocumentProbe : public YAML::EventHandler {
public:
    YAML::Mark start;
    std::optional<YAML::Mark> first_node;

    void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
    void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  const std::string&) override {
        node(mark);
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
        node(mark);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
        node(mark);
    }
    void OnMapEnd() override {}

private:
    void node(const YAML::Mark& mark) {
        if (!first_node) {
            first_node = mark;
        }
    }
};

Result<YAML::Node> load_yaml(std::string_view text, const TaskFileContext& ctx) {
    try {
        // Not YAML::LoadAll: yaml-cpp 0.7 (Debian 12) loops forever on a stray ',' outside a
        // flow collection (a file that is just ",", or "- a\n,"), appending an empty document
        // per turn until memory runs out (jbeder/yaml-cpp#1040, fixed upstream by #1319). The
        // documents are walked as events instead; a document that starts where the previous one
        // did means the parser is stuck on a token it cannot use.
        std::istringstream stream{std::string(text)};
        YAML::Parser parser(stream);
        std::vector<DocumentProbe> documents;
        for (DocumentProbe probe; parser.HandleNextDocument(probe); probe = DocumentProbe()) {
            if (!documents.empty() && probe.start.pos == documents.back().start.pos) {
                const auto at = static_cast<std::size_t>(std::max(probe.start.pos, 0));
                const std::string what =
                    at < text.size() ? fmt::format("unexpected '{}'", text[at]) : "unexpected end";
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{}:{}:{}: malformed YAML: {}", ctx.source,
                                        probe.start.line + 1, probe.start.column + 1, what));
            }
            documents.push_back(probe);
        }
        if (documents.size() > 1) {
            // Silently using the first of several tasks would lose the others.
            const YAML::Mark at = documents[1].first_node.value_or(documents[1].start);
            return error_at(ctx, at.line,
                            "a task file holds one task, but a second YAML document starts here; "
                            "submit each task from its own file");
        }
        return documents.empty() ? YAML::Node() : YAML::Load(std::string(text));
    } catch (const YAML::ParserException& e) {
        // yaml-cpp's marks are 0-based; editors count from 1.
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}:{}:{}: malformed YAML: {}", ctx.source, e.mark.line + 1,
                                e.mark.column + 1, e.msg));
    }
}

}  // namespace

Result<SubmitRequest> parse_yaml_task(std::string_view text, const TaskFileContext& ctx) {
    auto root = load_yaml(text, ctx);
    if (!root) {
        return tl::unexpected(root.error());
    }
    if (!root->IsDefined() || root->IsNull()) {
        return error_at(ctx, -1, "the task file is empty; it needs at least `command:`");
    }
    if (!root->IsMap()) {
        return error_at(ctx, root->Mark().line,
                        "a task file is a mapping of fields (name, command, gpus, ...), not a "
                        "list or a single value");
    }
    SubmitRequest r;
    try {
        if (auto s = parse_fields(*root, ctx, r); !s) {
            return tl::unexpected(s.error());
        }
    } catch (const YAML::Exception& e) {
        // yaml-cpp signals some malformed input lazily, while nodes are walked.
        return error_at(ctx, e.mark.line, fmt::format("malformed YAML: {}", e.msg));
    }
    if (r.command.empty()) {
        return error_at(ctx, -1, "no command; add e.g. `command: python train.py`");
    }
    if (r.name.empty()) {
        r.name = ctx.default_name;
    }
    if (r.workdir.empty()) {
        r.workdir = ctx.default_workdir.lexically_normal().string();
    }
    return r;
}

}  // namespace carma::api
