/* commands.h: plait's commands; each takes the arguments after its name and returns the exit
 * status. */
#ifndef PLAIT_COMMANDS_H
#define PLAIT_COMMANDS_H

int cmd_plan(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* The flags plan, build and tune take, the layout's among them. */
extern const char *const plan_flags[], *const build_flags[], *const tune_flags[];

#endif
