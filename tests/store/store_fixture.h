#pragma once
// A test that opens a store in a directory of its own, removed afterwards (also when the test
// took its permissions away), and can make the database what an older CARMA wrote.

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "store/store.h"

namespace carma::store {

class StoreFixture : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (std::filesystem::temp_directory_path() / "carma-store-test-XXXXXX")
                                  .string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        path_ = (dir_ / "carma.db").string();
    }

    void TearDown() override {
        namespace fs = std::filesystem;
        std::error_code ec;
        fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(dir_, ec);
    }

    // Tests ASSERT_NE(store, nullptr) on the result; the failure message is reported here.
    std::unique_ptr<Store> open_store() {
        auto store = Store::open(path_);
        if (!store) {
            ADD_FAILURE() << store.error().message;
            return nullptr;
        }
        return std::move(*store);
    }

    // Undoes the schema's steps above `version`, newest first (store/schema.cpp), as a CARMA of
    // that schema left the database; what a step changed in the rows is the test's to undo.
    void downgrade_to(int version) {
        static const std::vector<std::pair<int, std::vector<const char*>>> kUndo = {
            {10,
             {"ALTER TABLE attempts DROP COLUMN cores_json",
              "ALTER TABLE attempts DROP COLUMN total_cpu_s",
              "ALTER TABLE attempts DROP COLUMN max_rss_mib"}},
            {9,
             {"DROP TABLE usage", "ALTER TABLE attempts DROP COLUMN charged_gpu_s",
              "ALTER TABLE attempts DROP COLUMN slowdown"}},
            {8,
             {"ALTER TABLE history DROP COLUMN shared_s",
              "ALTER TABLE history DROP COLUMN sharing_class",
              "ALTER TABLE history DROP COLUMN speed_k"}},
            {7, {"ALTER TABLE history DROP COLUMN unobserved"}},
            {6,
             {"DROP INDEX tasks_state_uid", "DROP INDEX tasks_finished_at",
              "CREATE INDEX tasks_state ON tasks(state)"}},
            {5,
             {"ALTER TABLE attempts DROP COLUMN slurm_job",
              "ALTER TABLE attempts DROP COLUMN node"}},
            {4, {"ALTER TABLE attempts DROP COLUMN energy_j"}},
            {3, {"DROP TABLE history"}},
        };
        static_assert(kSchemaVersion == 10, "a new schema step needs its undo here");
        SQLite::Database raw(path_, SQLite::OPEN_READWRITE);
        for (const auto& [step, statements] : kUndo) {
            if (step > version) {
                for (const char* sql : statements) {
                    raw.exec(sql);
                }
            }
        }
        raw.exec("PRAGMA user_version = " + std::to_string(version));
    }

    std::filesystem::path dir_;
    std::string path_;
};

}  // namespace carma::store
