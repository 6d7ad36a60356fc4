#!/usr/bin/env bash
# web_search against local fixture servers that answer in each engine's
# documented format: DuckDuckGo's HTML endpoint (wrapped //duckduckgo.com/l/
# links, an ad block), SearXNG's JSON API and the Brave Search API, with
# their error answers (quota exceeded, bad key) mapped to clear skill errors,
# the parameters each engine receives, domain filters and the SQLite cache.
source "$(dirname "$0")/../fixtures/net/netenv.sh"
source "$(dirname "$0")/../lib.sh"
net_start || { fail setup "network namespace set-up failed"; finish; }
export SKILLS_DUCKDUCKGO_URL="$APP_URL/ddg/html/"
export SKILLS_SEARXNG_URL="$APP_URL/searx/"
export SKILLS_BRAVE_URL="$APP_URL/brave/res/v1/web/search"
export SKILLS_BRAVE_API_KEY=good-key

search() { run_skill web_search "$1"; }
jq_() { json_get "$1" "$2"; }
last_app() { grep "^APP .*$1" "$FIX_LOG" | tail -n 1; }

# --- DuckDuckGo (default provider) -------------------------------------------
out=$(search '{"query":"python"}')
check "ddg: default provider" test "$(jq_ "$out" '[j["success"], j["provider"], j["cached"]]')" = '[true, "duckduckgo", false]'
check "ddg: ten results by default" test "$(jq_ "$out" 'len(j["results"])')" = 10
check "ddg: first title, tags dropped" test "$(jq_ "$out" 'j["results"][0]["title"]')" = "Welcome to Python.org"
check "ddg: uddg link unwrapped" test "$(jq_ "$out" 'j["results"][0]["url"]')" = "https://www.python.org/"
check "ddg: link with parentheses unwrapped" test "$(jq_ "$out" 'j["results"][1]["url"]')" = "https://en.wikipedia.org/wiki/Python_(programming_language)"
check "ddg: snippet" test "$(jq_ "$out" 'j["results"][0]["snippet"]')" = "The official home of the Python Programming Language."
check "ddg: entity decoded" test "$(jq_ "$out" 'j["results"][5]["title"]')" = "Python & Data Science"
check "ddg: ad left out" test "$(jq_ "$out" '[r for r in j["results"] if "duckduckgo.com" in r["url"] or "Sponsored" in r["title"]]')" = "[]"
check "ddg: query and safe search sent" grep -q "^APP GET /ddg/html/?q=python&kp=-1$" "$FIX_LOG"
hits=$(app_hits /ddg/)
out=$(search '{"query":"python"}')
check "ddg: second call is cached" test "$(jq_ "$out" '[j["cached"], len(j["results"])]')" = '[true, 10]'
check "ddg: cache hit makes no request" test "$(app_hits /ddg/)" = "$hits"
out=$("$SKILLD" run web_search --key other-tenant --input '{"query":"python"}' 2>>"$TMP/stderr")
check "ddg: the cache is per key: another key is not told cached" test "$(jq_ "$out" '[j["success"], j["cached"]]')" = '[true, false]'
check "ddg: another key's search asks the engine" test "$(app_hits /ddg/)" = "$((hits + 1))"
out=$(search '{"query":"python","limit":3,"safe_search":"strict","time_range":"week","offset":10}')
check "ddg: limit" test "$(jq_ "$out" 'len(j["results"])')" = 3
check "ddg: strict, week, offset sent" grep -q "^APP GET /ddg/html/?q=python&kp=1&df=w&s=10$" "$FIX_LOG"
out=$(search '{"query":"python","safe_search":false,"limit":1}')
check "ddg: safe_search false is off" grep -q "kp=-2" "$FIX_LOG"
out=$(search '{"query":"python","include_domains":["python.org"]}')
check "ddg: include_domains filters" test "$(jq_ "$out" 'sorted(set(r["url"].split("/")[2] for r in j["results"]))')" = '["docs.python.org", "www.python.org"]'
check "ddg: include_domains sent as site:" test -n "$(last_app 'q=python+site%3Apython.org\|q=python%20site%3Apython.org')"
out=$(search '{"query":"python","exclude_domains":["python.org","wikipedia.org"],"limit":20}')
check "ddg: exclude_domains filters" test "$(jq_ "$out" '[h for h in (r["url"].split("/")[2] for r in j["results"]) if h == "python.org" or h.endswith(".python.org") or h.endswith("wikipedia.org")]')" = "[]"
check "ddg: exclude_domains keep the rest" test "$(jq_ "$out" 'len(j["results"])')" = 7
out=$(search '{"query":"python","include_domains":["bad domain"]}')
check "ddg: bad domain refused" test "$(code_of "$out")" = invalid_input
out=$(search '{"query":"ratelimit"}')
check "ddg: 429 is upstream_error" test "$(code_of "$out")" = upstream_error
check "ddg: 429 says quota" test "$(jq_ "$out" '"quota exceeded" in j["error"]["message"]')" = true
out=$(search '{"query":"anomaly"}')
check "ddg: 403 is upstream_error" test "$(jq_ "$out" '[j["error"]["code"], "HTTP 403" in j["error"]["message"]]')" = '["upstream_error", true]'
out=$(search '{"query":"challenge"}')
check "ddg: bot challenge (202) is upstream_error" test "$(jq_ "$out" '[j["error"]["code"], "challenge" in j["error"]["message"]]')" = '["upstream_error", true]'
out=$(SKILLS_SEARCH_CACHE_TTL_S=0 search '{"query":"nocache"}')
out=$(SKILLS_SEARCH_CACHE_TTL_S=0 search '{"query":"nocache"}')
check "ddg: TTL 0 disables the cache" test "$(jq_ "$out" 'j["cached"]'):$(app_hits 'q=nocache')" = "false:2"

# --- SearXNG -------------------------------------------------------------------
out=$(search '{"query":"python","provider":"searxng","limit":4,"time_range":"month"}')
check "searxng: results" test "$(jq_ "$out" '[j["provider"], len(j["results"]), j["results"][0]["url"]]')" = '["searxng", 4, "https://www.python.org/"]'
check "searxng: snippet from content" test "$(jq_ "$out" 'j["results"][1]["snippet"]')" = "Python is a high-level, general-purpose programming language."
check "searxng: JSON API asked" grep -q "^APP GET /searx/search?q=python&format=json&pageno=1&safesearch=1&time_range=month$" "$FIX_LOG"
out=$(search '{"query":"python","provider":"searxng","limit":2,"offset":3}')
check "searxng: offset within a page" test "$(jq_ "$out" '[r["url"] for r in j["results"]]')" = '["https://docs.python.org/3/tutorial/index.html", "https://www.learnpython.org/"]'
out=$(search '{"query":"ratelimit","provider":"searxng"}')
check "searxng: 429 is upstream_error with quota" test "$(jq_ "$out" '[j["error"]["code"], "quota" in j["error"]["message"]]')" = '["upstream_error", true]'
out=$(SKILLS_SEARXNG_URL= search '{"query":"python","provider":"searxng"}')
check "searxng: not configured" test "$(code_of "$out")" = invalid_config
out=$(SKILLS_SEARXNG_URL="$APP_URL/page" search '{"query":"python","provider":"searxng"}')
check "searxng: unexpected answer" test "$(code_of "$out")" = upstream_error

# --- Brave -------------------------------------------------------------------------
out=$(search '{"query":"python","provider":"brave","limit":5,"offset":5,"safe_search":"off","time_range":"day"}')
check "brave: results" test "$(jq_ "$out" '[j["provider"], len(j["results"]), j["results"][0]["title"]]')" = '["brave", 5, "Welcome to Python.org"]'
check "brave: markup stripped from description" test "$(jq_ "$out" 'j["results"][0]["snippet"]')" = "The official home of the Python Programming Language."
check "brave: parameters sent" grep -q "^APP GET /brave/res/v1/web/search?q=python&count=5&offset=1&safesearch=off&freshness=pd$" "$FIX_LOG"
out=$(SKILLS_BRAVE_API_KEY=wrong search '{"query":"python","provider":"brave"}')
check "brave: bad key is upstream_error" test "$(code_of "$out")" = upstream_error
check "brave: bad key message" test "$(jq_ "$out" '"API key was rejected" in j["error"]["message"] and "invalid" in j["error"]["message"]')" = true
out=$(SKILLS_BRAVE_API_KEY=quota-key search '{"query":"python","provider":"brave"}')
check "brave: quota exceeded" test "$(jq_ "$out" '[j["error"]["code"], "quota exceeded" in j["error"]["message"], "rate limit" in j["error"]["message"]]')" = '["upstream_error", true, true]'
out=$(SKILLS_BRAVE_API_KEY= search '{"query":"python","provider":"brave"}')
check "brave: missing key" test "$(code_of "$out")" = invalid_config
out=$(SKILLS_SEARCH_PROVIDER=brave search '{"query":"python","limit":2}')
check "provider from SKILLS_SEARCH_PROVIDER" test "$(jq_ "$out" 'j["provider"]')" = brave
out=$(search '{"query":"python","provider":"bing"}')
check "unknown provider refused" test "$(code_of "$out")" = invalid_input
out=$(search '{"query":"python","limit":21}')
check "limit above 20 refused" test "$(code_of "$out")" = invalid_input
finish
