#include "cli/main/option_table.h"

#include <cstdio>
#include <string_view>

namespace carma::cli {

nlohmann::json option_table(const CLI::App& app) {
    nlohmann::json options = nlohmann::json::array();
    for (const CLI::Option* o : app.get_options()) {
        nlohmann::json names = nlohmann::json::array();
        for (const std::string& n : o->get_lnames()) {
            names.push_back("--" + n);
        }
        for (const std::string& n : o->get_snames()) {
            names.push_back("-" + n);
        }
        const bool positional = !o->nonpositional();
        if (positional) {
            names.push_back(o->get_name());
        }
        // CLI11 names the type of every option that takes a value; a flag's is empty.
        options.push_back({{"names", names},
                           {"positional", positional},
                           {"flag", o->get_type_name().empty()},
                           {"required", o->get_required()},
                           {"multiple", o->get_expected_max() > 1},
                           {"type", o->get_type_name()},
                           {"default", o->get_default_str()},
                           {"description", o->get_description()}});
    }
    nlohmann::json subcommands = nlohmann::json::array();
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        subcommands.push_back(option_table(*sub));
    }
    return {{"name", app.get_name()},
            {"description", app.get_description()},
            {"options", options},
            {"subcommands", subcommands}};
}

bool print_option_table(const CLI::App& app, int argc, char** argv) {
    if (argc != 2 || std::string_view(argv[1]) != kOptionTableFlag) {
        return false;
    }
    const std::string text = option_table(app).dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
}

}  // namespace carma::cli
