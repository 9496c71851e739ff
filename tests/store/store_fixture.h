#pragma once
// A test that opens a store in a directory of its own, removed afterwards (also when the test
// took its permissions away).

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

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

    std::filesystem::path dir_;
    std::string path_;
};

}  // namespace carma::store
