/* commands.h — entry points of the tessera subcommands (tools/cmd_<name>.c). */
#ifndef TS_TOOLS_COMMANDS_H
#define TS_TOOLS_COMMANDS_H

int ts_cmd_inspect(int argc, char **argv);
int ts_cmd_quantize(int argc, char **argv);
int ts_cmd_run(int argc, char **argv);
int ts_cmd_chat(int argc, char **argv);
int ts_cmd_serve(int argc, char **argv);
int ts_cmd_bench(int argc, char **argv);
int ts_cmd_perplexity(int argc, char **argv);
int ts_cmd_tokenize(int argc, char **argv);
int ts_cmd_embed(int argc, char **argv);
int ts_cmd_template(int argc, char **argv);
int ts_cmd_grammar(int argc, char **argv);

#endif /* TS_TOOLS_COMMANDS_H */
