# embed_page.cmake — turns page.html into page.c (the chat page compiled into the server).
#
#   cmake -DIN=src/server/page.html -DOUT=src/server/page.c -P src/server/embed_page.cmake
#
# page.c is committed so that building needs no generator step; the test server/page_sync
# regenerates it into the build tree and fails when the committed copy is stale.
file(READ "${IN}" html)
string(REPLACE "\\" "\\\\" html "${html}")
string(REPLACE "\"" "\\\"" html "${html}")
string(REPLACE "\t" "\\t" html "${html}")
string(REPLACE "\n" "\\n\"\n    \"" html "${html}")
file(WRITE "${OUT}"
"/* page.c — GENERATED from page.html by embed_page.cmake; edit page.html, then run\n"
" *   cmake -DIN=src/server/page.html -DOUT=src/server/page.c -P src/server/embed_page.cmake\n"
" */\n"
"/* clang-format off */\n"
"#include <stddef.h>\n\n"
"extern const char ts_server_page_html[];\n"
"extern const size_t ts_server_page_html_len;\n\n"
"const char ts_server_page_html[] =\n"
"    \"${html}\";\n"
"const size_t ts_server_page_html_len = sizeof ts_server_page_html - 1;\n")
