#include "cli/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>

namespace mooncake {
namespace cli {
namespace {

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t n = size * count;
  if (body->size() + n > HttpClient::kMaxBodyBytes) return 0;  // curl fails the transfer
  body->append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  size_t n = size * count;
  std::string line(data, n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string value = line.substr(colon + 1);
    size_t begin = value.find_first_not_of(" \t");
    size_t end = value.find_last_not_of(" \t\r\n");
    (*headers)[name] = begin == std::string::npos ? "" : value.substr(begin, end - begin + 1);
  }
  return n;
}

}  // namespace

HttpClient::HttpClient() : curl_(curl_easy_init()) {}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

bool HttpClient::Get(const std::string& url, HttpResponse* out, std::string* error) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) {
    *error = "libcurl could not be initialised";
    return false;
  }
  *out = HttpResponse();
  char curl_error[CURL_ERROR_SIZE] = {0};
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 30000L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out->body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &out->headers);
  curl_slist* headers = nullptr;
  if (!bearer_.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + bearer_).c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  }
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    *error = curl_error[0] != '\0' ? curl_error : curl_easy_strerror(rc);
    return false;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
  return true;
}

std::string HttpClient::Escape(const std::string& text) {
  char* escaped =
      curl_easy_escape(static_cast<CURL*>(curl_), text.data(), static_cast<int>(text.size()));
  std::string result = escaped != nullptr ? escaped : "";
  curl_free(escaped);
  return result;
}

}  // namespace cli
}  // namespace mooncake
